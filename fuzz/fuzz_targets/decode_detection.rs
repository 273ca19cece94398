//! Fuzzes the detection geometry decoder with arbitrary strings and image sizes: a polygon or
//! an error, never a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (u16, u16, &str)| {
    let (width, height, geometry) = input;
    let _ = streetlevel_detection::decode_pixels(geometry, u32::from(width), u32::from(height));
    let _ = streetlevel_detection::decode_normalized(geometry);
});
