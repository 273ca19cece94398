//! Finding the image behind a mesh or an `SfM` cluster, which a server needs to render media
//! that a data set left to be made on request.

#![allow(clippy::unwrap_used)]

mod common;

use common::{dataset, insert_all};
use streetlevel_model::MediaId;
use streetlevel_store::Store;

#[test]
fn meshes_and_clusters_lead_back_to_their_images() {
    let data = dataset(11, 300);
    let mut store = Store::in_memory();
    insert_all(&mut store, &data);
    let mut n_checked = 0;
    for image in &data.images {
        if let Some(mesh) = image.mesh {
            // Random media IDs may repeat; the answer must be an image that has this mesh.
            let found = store.image_with_mesh(mesh).unwrap();
            assert_eq!(found.mesh, Some(mesh));
            n_checked += 1;
        }
        if let Some(cluster) = image.sfm_cluster {
            let found = store.image_with_sfm_cluster(cluster).unwrap();
            assert_eq!(found.sfm_cluster, Some(cluster));
        }
    }
    assert!(n_checked > 0, "the data set has meshes");
    let unused = MediaId(u64::MAX);
    assert!(
        data.images
            .iter()
            .all(|image| image.mesh != Some(unused) && image.sfm_cluster != Some(unused))
    );
    assert_eq!(store.image_with_mesh(unused), None);
    assert_eq!(store.image_with_sfm_cluster(unused), None);
}
