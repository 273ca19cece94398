//! `GET /i/<image id>`: an image's short share link. It answers the explorer on that image
//! (the modules rewrite the address to `/explore?image=<id>`), with a preview card for the
//! sites the link is pasted into: Open Graph and Twitter meta whose picture is the image's
//! 1024 px thumbnail as a signed media URL, fetchable without a token.
//!
//! Signing is what makes that safe: the URL is made here only for an image the store shows
//! publicly ([`crate::EmbedImages::embed_image`] knows no hidden or deleted image), and the
//! media route checks the image's state again on every fetch, so hiding or deleting an image
//! ends every URL signed before. A hidden, deleted or unknown image answers 404 with no card.

use bytes::Bytes;
use http::Response;
use http::request::Parts;
use maud::{Markup, html};
use streetlevel_model::Timestamp;

use crate::EmbedImage;
use crate::config::Urls;
use crate::form::Form;
use crate::web::Web;

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// The UTC day of `time` in words: `5 March 2024`.
pub(crate) fn long_date(time: Timestamp) -> String {
    let iso = time.to_iso8601();
    let month: Option<usize> = iso.get(5..7).and_then(|text| text.parse().ok());
    let day: Option<u32> = iso.get(8..10).and_then(|text| text.parse().ok());
    match (iso.get(0..4), month, day) {
        (Some(year), Some(month @ 1..=12), Some(day)) => {
            format!("{day} {} {year}", MONTHS[month - 1])
        }
        _ => iso,
    }
}

/// A place as its coordinates with the hemispheres, to about a metre: `55.70584° N, 13.19321° E`.
pub(crate) fn place(latitude: f64, longitude: f64) -> String {
    let north_south = if latitude < 0.0 { 'S' } else { 'N' };
    let east_west = if longitude < 0.0 { 'W' } else { 'E' };
    format!(
        "{:.5}° {north_south}, {:.5}° {east_west}",
        latitude.abs(),
        longitude.abs()
    )
}

/// `url` made absolute against `origin` when it is a path (a card's picture must be absolute).
fn absolute(url: &str, origin: &str) -> String {
    if url.starts_with('/') {
        format!("{origin}{url}")
    } else {
        url.to_owned()
    }
}

/// The preview card of `image`'s share link: its title (the date and the place), a line that
/// says what it is, the canonical link and the 1024 px thumbnail.
pub(crate) fn preview_card(image: &EmbedImage, urls: &Urls) -> Markup {
    let title = card_title(image);
    let description = format!(
        "A street-level photo taken on {} at {}, on an interactive map.",
        long_date(image.captured_at),
        place(image.latitude, image.longitude)
    );
    let link = format!("{}/i/{}", urls.web, image.id);
    let picture = image
        .thumb_1024_url
        .as_deref()
        .map(|url| absolute(url, &urls.web));
    let alt = format!("Street-level photo {}", image.id);
    html! {
        link rel="canonical" href=(link); "\n"
        meta name="description" content=(description); "\n"
        meta property="og:type" content="website"; "\n"
        meta property="og:site_name" content="streetlevel"; "\n"
        meta property="og:title" content=(title); "\n"
        meta property="og:description" content=(description); "\n"
        meta property="og:url" content=(link); "\n"
        @if let Some(picture) = &picture {
            meta property="og:image" content=(picture); "\n"
            meta property="og:image:type" content="image/jpeg"; "\n"
            meta property="og:image:width" content="1024"; "\n"
            meta property="og:image:alt" content=(alt); "\n"
        }
        meta name="twitter:card" content=(if picture.is_some() { "summary_large_image" } else { "summary" }); "\n"
        meta name="twitter:title" content=(title); "\n"
        meta name="twitter:description" content=(description); "\n"
        @if let Some(picture) = &picture {
            meta name="twitter:image" content=(picture); "\n"
            meta name="twitter:image:alt" content=(alt); "\n"
        }
    }
}

/// The card's title, also the page's: `Street-level photo, 5 March 2024, 55.70584° N, 13.19321° E`.
pub(crate) fn card_title(image: &EmbedImage) -> String {
    format!(
        "Street-level photo, {}, {}",
        long_date(image.captured_at),
        place(image.latitude, image.longitude)
    )
}

impl Web {
    /// `GET /i/<id>`: the explorer on the image `id`, with its preview card; 404 without one
    /// when there is no public image `id`.
    pub(crate) fn image_link(&self, parts: &Parts, id: &str) -> Response<Bytes> {
        // Only the image counts: the explorer's other parameters belong to `/explore`.
        self.explorer(parts, &Form::parse(""), Some(id), true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_places_in_words() {
        assert_eq!(long_date(Timestamp(0)), "1 January 1970");
        // 2024-03-05T23:59:59Z, and a leap day.
        assert_eq!(long_date(Timestamp(1_709_683_199_000)), "5 March 2024");
        assert_eq!(long_date(Timestamp(1_709_164_800_000)), "29 February 2024");
        assert_eq!(place(55.705_841, 13.193_214), "55.70584° N, 13.19321° E");
        assert_eq!(place(-33.8, -70.25), "33.80000° S, 70.25000° W");
    }

    #[test]
    fn a_card_picture_given_as_a_path_is_made_absolute() {
        assert_eq!(
            absolute("/media/thumb/1/1024?s=a", "https://x.example"),
            "https://x.example/media/thumb/1/1024?s=a"
        );
        assert_eq!(
            absolute("https://m.example/a", "https://x.example"),
            "https://m.example/a"
        );
    }
}
