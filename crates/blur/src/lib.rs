#![doc = include_str!("../README.md")]

mod blurrer;
mod detector;
mod error;
mod jpeg;
mod model;
mod onnx_shape;
mod pixels;
mod region;
mod runtime;
mod text;
mod units;

pub use blurrer::{
    Blurred, BlurredPixels, Blurrer, CLOSE_UP_PASS_SIDE, Hints, LocalBlurrer, MAIN_PASS_SIDE,
    PANORAMA_WIDTH, Pass, blur_regions, passes, plate_pass, stored_size, stored_to_upright_shares,
    upright_shares_to_stored,
};
pub use detector::{Detector, Family};
pub use error::BlurError;
pub use jpeg::BLURRED_QUALITY;
pub use model::{CENTERFACE_FILE, CENTERFACE_SHA256, ModelFile};
pub use pixels::MAX_PIXELS;
pub use region::{Region, RegionClass};
pub use runtime::{ONNXRUNTIME_LIBRARY, load_runtime};
pub use text::{
    PLATE_BAND_TOP, PLATE_PASS_SIDES, PLATE_TEXT_FILE, PLATE_TEXT_SHA256, PLATE_TEXT_V4_FILE,
    PLATE_TEXT_V4_PASS_SIDES, PLATE_TEXT_V4_SHA256,
};

pub(crate) use region::Bounds;
