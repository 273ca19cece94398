//! Without its runtime library the blurrer cannot be made, and says which file is missing
//! (a test binary of its own: a process loads its runtime once).

#[test]
fn a_missing_runtime_library_is_an_error_naming_the_file() {
    let missing = std::path::Path::new("/nonexistent/libonnxruntime.so.1.32.0");
    let error = streetlevel_blur::load_runtime(missing).unwrap_err();
    assert!(matches!(error, streetlevel_blur::BlurError::Runtime { .. }));
    assert!(
        error
            .to_string()
            .contains("/nonexistent/libonnxruntime.so.1.32.0"),
        "{error}"
    );
    // Asked again, the answer is the same.
    assert!(streetlevel_blur::load_runtime(missing).is_err());
}
