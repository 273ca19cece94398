//! The believed pieces of a job joined: each image takes its pose from the piece in which
//! it is most central, and pieces that agree on the images they share are one connected
//! component (`merge_cc`).

use std::collections::HashMap;

use super::plan::Plan;
use crate::pose::Pose;
use crate::validate::{Piece, median};

/// Pieces that share at least this many images agreeing within these bounds are one
/// connected component.
const LINK_MIN_SHARED: usize = 3;
const LINK_MAX_METRES: f64 = 5.0;
const LINK_MAX_DEGREES: f64 = 5.0;

/// The pieces joined: for each planned image, the piece (index) and shot that give its pose,
/// and each piece's connected component (a representative piece index).
pub(super) struct Joined {
    pub(super) home: Vec<Option<(usize, usize)>>,
    pub(super) component: Vec<usize>,
}

pub(super) fn join(plan: &Plan, pieces: &[(usize, Piece)]) -> Joined {
    let mut home: Vec<Option<(usize, usize, usize)>> = vec![None; plan.images.len()];
    for (piece_index, (part, piece)) in pieces.iter().enumerate() {
        let members = &plan.parts[*part];
        for (shot_index, shot) in piece.shots.iter().enumerate() {
            let position = members
                .iter()
                .position(|&image| image == shot.image)
                .unwrap_or(0);
            let centrality = position.min(members.len() - 1 - position);
            if home[shot.image].is_none_or(|(_, _, best)| centrality > best) {
                home[shot.image] = Some((piece_index, shot_index, centrality));
            }
        }
    }
    // Union-find over pieces that agree on the images they share.
    let mut parent: Vec<usize> = (0..pieces.len()).collect();
    for a in 0..pieces.len() {
        for b in a + 1..pieces.len() {
            let poses_b: HashMap<usize, &Pose> = pieces[b]
                .1
                .shots
                .iter()
                .map(|shot| (shot.image, &shot.pose))
                .collect();
            let mut distances = Vec::new();
            let mut angles = Vec::new();
            for shot in &pieces[a].1.shots {
                if let Some(other) = poses_b.get(&shot.image) {
                    let (p, q) = (shot.pose.centre(), other.centre());
                    distances.push(
                        ((p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2) + (p[2] - q[2]).powi(2))
                            .sqrt(),
                    );
                    angles.push(rotation_difference(&shot.pose, other));
                }
            }
            if distances.len() >= LINK_MIN_SHARED
                && median(distances.into_iter()) <= LINK_MAX_METRES
                && median(angles.into_iter()) <= LINK_MAX_DEGREES
            {
                let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
                parent[ra.max(rb)] = ra.min(rb);
            }
        }
    }
    let component = (0..pieces.len())
        .map(|piece| root(&mut parent, piece))
        .collect();
    Joined {
        home: home
            .into_iter()
            .map(|home| home.map(|(piece, shot, _)| (piece, shot)))
            .collect(),
        component,
    }
}

/// The representative of `node`'s set (union-find, halving the path).
pub(super) fn root(parent: &mut [usize], mut node: usize) -> usize {
    while parent[node] != node {
        parent[node] = parent[parent[node]];
        node = parent[node];
    }
    node
}

/// The angle (degrees) of the rotation between two poses' orientations.
pub(super) fn rotation_difference(a: &Pose, b: &Pose) -> f64 {
    // trace(Ra Rbᵀ) = 1 + 2 cos θ.
    let mut trace = 0.0;
    for row in 0..3 {
        for column in 0..3 {
            trace += a.rotation[row][column] * b.rotation[row][column];
        }
    }
    ((trace - 1.0) / 2.0).clamp(-1.0, 1.0).acos().to_degrees()
}
