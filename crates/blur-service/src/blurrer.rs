//! The external service as a [`Blurrer`]: what the import pipeline calls when `blur_url` is set.

use streetlevel_blur::{BlurError, Blurred, Blurrer, Hints, Region, RegionClass};

use crate::client::{ServiceClient, jpeg_size};
use crate::protocol::{Found, Metadata};

impl Blurrer for ServiceClient {
    /// The service's blurred picture, and as regions the annotations it sent that name a face
    /// or a plate and have a box (clamped to the picture). Any failure is a
    /// [`BlurError::Service`] saying whether it is worth trying again.
    fn blur(&self, jpeg: &[u8], _hints: Hints) -> Result<Blurred, BlurError> {
        let answer = ServiceClient::blur(self, jpeg).map_err(|error| {
            if error.is_transient() {
                BlurError::Unavailable(format!(
                    "{error} ({}): the picture waits for a later try",
                    self.url()
                ))
            } else {
                BlurError::Service(format!("{error} ({}): the picture is refused", self.url()))
            }
        })?;
        let (width, height) = jpeg_size(&answer.jpeg).map_err(BlurError::Service)?;
        let regions = answer
            .metadata
            .as_ref()
            .map(|metadata| regions(metadata, self.url(), u32::from(width), u32::from(height)))
            .unwrap_or_default();
        Ok(Blurred {
            jpeg: answer.jpeg,
            regions,
        })
    }

    fn fingerprint(&self) -> String {
        format!("service {}", self.url())
    }
}

/// A service's coordinate rounded to the nearest pixel edge and clamped to `0..=limit`
/// (`NaN` is 0).
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // clamped to `0..=limit` first
fn to_pixel(value: f64, limit: u32) -> u32 {
    value.round().clamp(0.0, f64::from(limit)) as u32
}

/// The regions of the service's annotations, in a `width` x `height` picture.
pub fn regions(metadata: &Metadata, url: &str, width: u32, height: u32) -> Vec<Region> {
    let model = match &metadata.service_name {
        Some(name) => format!("{name} at {url}"),
        None => url.to_owned(),
    };
    metadata
        .annotations
        .iter()
        .filter_map(|annotation| {
            let class = match annotation.found()? {
                Found::Face => RegionClass::Face,
                Found::Plate => RegionClass::Plate,
            };
            let (x0, y0, x1, y1) = annotation.bounds()?;
            let (x0, y0, x1, y1) = (
                to_pixel(x0, width),
                to_pixel(y0, height),
                to_pixel(x1, width),
                to_pixel(y1, height),
            );
            (x1 > x0 && y1 > y0).then(|| Region {
                class,
                score: annotation.score().unwrap_or(1.0).clamp(0.0, 1.0),
                x: x0,
                y: y0,
                width: x1 - x0,
                height: y1 - y0,
                model: model.clone(),
                model_sha256: String::new(),
            })
        })
        .collect()
}
