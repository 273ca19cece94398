//! What a blurrer found: a class, a score and a box in the original's stored pixels.

/// What a region shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RegionClass {
    /// A face.
    Face,
    /// A licence plate.
    Plate,
    /// Anything else a person asked to blur by hand (a house, a window, a person's body).
    Other,
}

impl RegionClass {
    /// The name stored with the region.
    pub fn as_str(self) -> &'static str {
        match self {
            RegionClass::Face => "face",
            RegionClass::Plate => "plate",
            RegionClass::Other => "other",
        }
    }

    /// The class of a stored name.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "face" => Some(RegionClass::Face),
            "plate" => Some(RegionClass::Plate),
            "other" => Some(RegionClass::Other),
            _ => None,
        }
    }

    /// How much a found box is grown (width and height, about its centre) before it is
    /// blurred: detectors draw faces tight (hair, ears and chin stay outside) and plates
    /// to the character edges. Faces grow 1.5 times: at 1.3 the recall measurement
    /// (docs/PRIVACY.md) left 3 of 24 faces, in profile or in groups, mostly readable.
    pub fn growth(self) -> f32 {
        match self {
            RegionClass::Face => 1.5,
            RegionClass::Plate => 1.15,
            // Drawn by hand around what is to go: taken as drawn.
            RegionClass::Other => 1.0,
        }
    }
}

/// One blurred region of a picture, in the pixels of the original as stored (before its
/// Exif orientation is applied), already grown and clamped to the picture.
#[derive(Debug, Clone, PartialEq)]
pub struct Region {
    /// What it shows.
    pub class: RegionClass,
    /// The detector's confidence, 0 to 1.
    pub score: f32,
    /// Left edge.
    pub x: u32,
    /// Top edge.
    pub y: u32,
    /// Width, at least 1.
    pub width: u32,
    /// Height, at least 1.
    pub height: u32,
    /// The model (file name) or service that found it.
    pub model: String,
    /// The model file's SHA-256 in hex (empty for a service).
    pub model_sha256: String,
}

/// A box in floating-point pixels: left, top, right, bottom.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Bounds {
    pub x0: f32,
    pub y0: f32,
    pub x1: f32,
    pub y1: f32,
}

impl Bounds {
    pub fn area(&self) -> f32 {
        (self.x1 - self.x0).max(0.0) * (self.y1 - self.y0).max(0.0)
    }

    pub fn intersection(&self, other: &Bounds) -> f32 {
        let width = self.x1.min(other.x1) - self.x0.max(other.x0);
        let height = self.y1.min(other.y1) - self.y0.max(other.y0);
        width.max(0.0) * height.max(0.0)
    }

    /// Intersection over union.
    pub fn iou(&self, other: &Bounds) -> f32 {
        let intersection = self.intersection(other);
        let union = self.area() + other.area() - intersection;
        if union <= 0.0 {
            0.0
        } else {
            intersection / union
        }
    }

    /// Scaled by `factor` about its centre.
    pub fn grown(&self, factor: f32) -> Bounds {
        let (cx, cy) = (
            f32::midpoint(self.x0, self.x1),
            f32::midpoint(self.y0, self.y1),
        );
        let (half_width, half_height) = (
            (self.x1 - self.x0) * factor / 2.0,
            (self.y1 - self.y0) * factor / 2.0,
        );
        Bounds {
            x0: cx - half_width,
            y0: cy - half_height,
            x1: cx + half_width,
            y1: cy + half_height,
        }
    }
}

/// A detector's raw find, in the pixels of the image it was given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Candidate {
    pub bounds: Bounds,
    pub score: f32,
}

/// Greedy non-maximum suppression: the best-scoring of boxes overlapping by more than
/// `threshold` (intersection over union), or lying mostly (70 %) inside a better one, is kept.
pub(crate) fn suppress(mut candidates: Vec<Candidate>, threshold: f32) -> Vec<Candidate> {
    candidates.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut kept: Vec<Candidate> = Vec::new();
    for candidate in candidates {
        let overlaps = kept.iter().any(|better| {
            better.bounds.iou(&candidate.bounds) > threshold
                || better.bounds.intersection(&candidate.bounds)
                    > 0.7 * candidate.bounds.area().max(f32::MIN_POSITIVE)
        });
        if !overlaps {
            kept.push(candidate);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(x0: f32, y0: f32, x1: f32, y1: f32, score: f32) -> Candidate {
        Candidate {
            bounds: Bounds { x0, y0, x1, y1 },
            score,
        }
    }

    #[test]
    fn suppression_keeps_the_best_of_overlapping_boxes_and_every_separate_one() {
        let kept = suppress(
            vec![
                candidate(0.0, 0.0, 10.0, 10.0, 0.6),
                candidate(1.0, 1.0, 11.0, 11.0, 0.9),
                candidate(50.0, 50.0, 60.0, 60.0, 0.5),
                // Inside the best one: a second pass's find of the same face.
                candidate(3.0, 3.0, 7.0, 7.0, 0.95),
            ],
            0.3,
        );
        let scores: Vec<f32> = kept.iter().map(|found| found.score).collect();
        assert_eq!(scores, [0.95, 0.9, 0.5]);
    }

    #[test]
    fn growing_keeps_the_centre() {
        let grown = Bounds {
            x0: 10.0,
            y0: 20.0,
            x1: 20.0,
            y1: 40.0,
        }
        .grown(1.5);
        assert_eq!(
            grown,
            Bounds {
                x0: 7.5,
                y0: 15.0,
                x1: 22.5,
                y1: 45.0
            }
        );
    }
}
