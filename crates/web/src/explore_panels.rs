//! The explorer's panels, rendered on the server so that they work without JavaScript (the
//! filter and layer forms are plain `GET /explore` forms) and are enhanced by
//! `static/explorer/`: the filters, the layer switcher, the sequence player, the legend and the
//! share dialog.

use maud::{Markup, html};
use streetlevel_import::{MAX_CONTACT_CHARS, MAX_REASON_CHARS};

use crate::form::Form;

/// The filters named in the explorer's URL, as given (the modules check them again).
pub(crate) struct Filters<'a> {
    pub(crate) from: &'a str,
    pub(crate) to: &'a str,
    pub(crate) pano: &'a str,
    pub(crate) creator: &'a str,
    pub(crate) org: &'a str,
}

impl<'a> Filters<'a> {
    pub(crate) fn of(query: &'a Form) -> Self {
        let value = |name| query.get(name).unwrap_or("");
        Self {
            from: value("from"),
            to: value("to"),
            pano: value("pano"),
            creator: value("creator"),
            org: value("org"),
        }
    }
}

/// The filter form: capture dates with presets, panoramas, creator and organisation. Without
/// JavaScript it submits to `/explore` (keeping the image); with it, every change applies at once.
pub(crate) fn filter_form(filters: &Filters<'_>, image: Option<&str>) -> Markup {
    html! {
        details id="filters-panel" class="filters" {
            summary { "Filters" span id="filters-active" class="active" {} } "\n"
            form id="filters" method="get" action="/explore" {
                "\n"
                fieldset {
                    legend { "Capture date" }
                    label for="from" { "From" }
                    input id="from" name="from" type="date" value=(filters.from); "\n"
                    label for="to" { "To" }
                    input id="to" name="to" type="date" value=(filters.to); "\n"
                    div class="presets" role="group" aria-label="Date presets" {
                        button type="button" data-months="1" { "Past month" }
                        button type="button" data-months="12" { "Past year" }
                        button type="button" data-months="0" { "Any date" }
                    }
                } "\n"
                label for="pano" { "Panoramas" }
                select id="pano" name="pano" {
                    option value="" selected[filters.pano.is_empty()] { "Included" }
                    option value="only" selected[filters.pano == "only"] { "Only panoramas" }
                    option value="exclude" selected[filters.pano == "exclude"] { "No panoramas" }
                } "\n"
                label for="creator" { "Creator (username)" }
                input id="creator" name="creator" type="text" autocomplete="off" spellcheck="false" value=(filters.creator); "\n"
                label for="org" { "Organisation ID" }
                input id="org" name="org" type="text" inputmode="numeric" pattern="[0-9]*" value=(filters.org); "\n"
                @if let Some(image) = image {
                    input type="hidden" name="image" value=(image);
                }
                button type="submit" { "Apply" } "\n"
            } "\n"
        }
    }
}

/// The map's layers people can show or hide, by their name in the URL's `layers`, with their
/// labels (`layers.mjs` has the same names).
const LAYERS: &[(&str, &str)] = &[
    ("images", "Images and sequences"),
    ("density", "Density at low zoom"),
    ("points", "Map features"),
    ("signs", "Traffic signs"),
];

/// The layers shown without a `layers` parameter.
const DEFAULT_LAYERS: &[&str] = &["images", "density"];

/// The layers `query` names: every `layers` value is a comma list (a form without JavaScript
/// repeats the parameter), names not known are ignored; the default ones without the parameter.
pub(crate) fn shown_layers(query: &Form) -> Vec<&'static str> {
    if query.get("layers").is_none() {
        return DEFAULT_LAYERS.to_vec();
    }
    let named: Vec<&str> = query
        .all("layers")
        .flat_map(|value| value.split(','))
        .collect();
    LAYERS
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| named.contains(name))
        .collect()
}

/// The layer switcher, a checkbox per layer. Without JavaScript it submits to `/explore`
/// (keeping the image); its hidden `none` keeps "nothing ticked" from meaning the default.
pub(crate) fn layer_switcher(shown: &[&str], image: Option<&str>) -> Markup {
    html! {
        details id="layers-panel" class="filters layers" {
            summary { "Layers" } "\n"
            form id="layers" method="get" action="/explore" {
                "\n"
                fieldset {
                    legend { "Shown on the map" }
                    @for (name, label) in LAYERS {
                        label class="check" {
                            input type="checkbox" name="layers" value=(name) checked[shown.contains(name)];
                            " " (label)
                        } "\n"
                    }
                }
                input type="hidden" name="layers" value="none";
                @if let Some(image) = image {
                    input type="hidden" name="image" value=(image);
                }
                button type="submit" { "Apply" } "\n"
            } "\n"
        }
    }
}

/// The panel of a map feature picked on the map (`features.mjs`): which feature, and Previous
/// and Next through the images that saw it. It needs the map, so it starts hidden.
pub(crate) fn feature_panel() -> Markup {
    html! {
        section id="feature" class="feature" aria-labelledby="feature-title" hidden {
            "\n"
            h2 id="feature-title" { "Map feature" } "\n"
            p id="feature-position" role="status" {} "\n"
            div class="feature-buttons" {
                button id="feature-previous" type="button" { "Previous image" } "\n"
                button id="feature-next" type="button" { "Next image" } "\n"
                button id="feature-close" type="button" { "Close" } "\n"
            }
        }
    }
}

/// The sequence player: play and pause, direction, speed, first and last image, the lock on the
/// sequence and the position in it. It needs the viewer, so it starts hidden and `player.mjs`
/// shows it.
pub(crate) fn player_bar(speed: &str) -> Markup {
    let speed = if speed.is_empty() { "1" } else { speed };
    html! {
        div id="player" class="player" role="group" aria-label="Sequence player" hidden {
            "\n"
            button id="first" type="button" aria-label="First image of the sequence" { "First" } "\n"
            button id="play" type="button" aria-pressed="false" { "Play" } "\n"
            button id="reverse" type="button" aria-pressed="false" { "Reverse" } "\n"
            button id="last" type="button" aria-label="Last image of the sequence" { "Last" } "\n"
            label for="speed" { "Speed" } "\n"
            input id="speed" type="range" min="0.25" max="4" step="0.25" value=(speed); "\n"
            button id="lock" type="button" aria-pressed="false" { "Stay in this sequence" } "\n"
            span id="position" class="position" {} "\n"
        }
    }
}

/// What is known of the image shown ("About this image", filled by `legend.mjs`) and the
/// share dialog with the exact view's link, the image's short link (`/i/<id>`) and the
/// `/embed` snippet.
pub(crate) fn legend_and_share() -> Markup {
    let copy = |target: &str, label: &str| {
        html! { button type="button" class="copy" data-copy=(target) aria-label=(label) { "Copy" } }
    };
    html! {
        details id="legend" class="legend" hidden {
            summary { "About this image" } "\n"
            div class="legend-body" {
                dl {
                    dt { "Captured" } dd id="legend-date" {} "\n"
                    dt { "Creator" } dd id="legend-creator" {} "\n"
                    dt { "Organisation" } dd id="legend-org" {} "\n"
                    dt { "Camera" } dd id="legend-camera" {} "\n"
                    dt { "Coordinates" } dd { span id="legend-coordinates" {} " " (copy("legend-coordinates", "Copy the coordinates")) } "\n"
                    dt { "Image ID" } dd { code id="legend-image" {} " " (copy("legend-image", "Copy the image ID")) } "\n"
                    dt { "Sequence ID" } dd { code id="legend-sequence" {} " " (copy("legend-sequence", "Copy the sequence ID")) } "\n"
                }
                p class="legend-links" {
                    a id="legend-json" href="#" { "The image's API JSON" } " "
                    a id="legend-osm" href="#" { "Edit OpenStreetMap here (iD)" }
                }
            }
        } "\n"
        button id="share-open" type="button" aria-haspopup="dialog" { "Share" } "\n"
        dialog id="share" aria-labelledby="share-title" {
            h2 id="share-title" { "Share this view" } "\n"
            label for="permalink" { "Link to this view" } "\n"
            input id="permalink" type="text" readonly; " " (copy("permalink", "Copy the link")) "\n"
            div id="short-link-row" class="share-row" {
                label for="short-link" { "Short link to this image (with a preview card)" } "\n"
                input id="short-link" type="text" readonly; " " (copy("short-link", "Copy the short link")) "\n"
            } "\n"
            label for="embed-code" { "Embed this image in a web page" } "\n"
            textarea id="embed-code" rows="3" readonly {} " " (copy("embed-code", "Copy the embed code")) "\n"
            form method="dialog" { button type="submit" { "Close" } } "\n"
        }
    }
}

/// Keys (one or more ways to press them) and what they do.
type Keys = [(&'static [&'static str], &'static str)];

/// The keys of the page, the map and the viewer (mapillary-js's own keys), by where they work.
const SHORTCUTS: &[(&str, &Keys)] = &[
    (
        "Anywhere",
        &[
            (&["?"], "Open this list"),
            (
                &["Tab", "Shift + Tab"],
                "Go to the next or the previous control",
            ),
            (&["Escape"], "Close a dialog"),
        ],
    ),
    (
        "On the map (Tab to it)",
        &[
            (&["←", "↑", "→", "↓"], "Move the map"),
            (&["+", "-"], "Zoom in or out"),
            (
                &["Enter"],
                "Show the image nearest the centre, under the ring",
            ),
        ],
    ),
    (
        "On the image (Tab to it, or click it)",
        &[
            (
                &["↑", "↓", "←", "→"],
                "Step forward, back, left or right to a nearby image",
            ),
            (&["Shift + ←", "Shift + →"], "Turn left or right"),
            (&["Shift + ↓"], "Turn around"),
            (&["Shift + ↑"], "Go to a panorama nearby"),
            (
                &["Alt + ↑", "Alt + ↓"],
                "Next or previous image of the sequence",
            ),
            (&["Space"], "Play or pause the sequence"),
            (&["Shift + D"], "Play the other way"),
            (&["<", ">"], "Play slower or faster"),
            (&["+", "-"], "Zoom in or out"),
        ],
    ),
];

/// The shortcut sheet, a native `<dialog>` that `?` or the "Shortcuts" button opens
/// (`shortcuts.mjs`).
pub(crate) fn shortcut_sheet() -> Markup {
    html! {
        button id="shortcuts-open" type="button" aria-haspopup="dialog" aria-keyshortcuts="?" { "Shortcuts" } "\n"
        dialog id="shortcuts" class="shortcuts" aria-labelledby="shortcuts-title" {
            h2 id="shortcuts-title" { "Keyboard shortcuts" } "\n"
            @for (place, keys) in SHORTCUTS {
                h3 { (place) } "\n"
                dl {
                    @for (combinations, what) in *keys {
                        dt {
                            @for (index, combination) in combinations.iter().enumerate() {
                                @if index > 0 { " " }
                                kbd { (combination) }
                            }
                        }
                        dd { (what) } "\n"
                    }
                }
            }
            form method="dialog" { button type="submit" { "Close" } } "\n"
        }
    }
}

/// "Other dates here" (`dates.mjs`): the button, the native `<dialog>` listing the images of
/// other sequences at this place by capture date, and the comparison of two of them with a
/// curtain (a labelled range, so arrows, Home and End move it). They need the viewer, so the
/// button starts hidden.
pub(crate) fn other_dates() -> Markup {
    html! {
        button id="dates-open" type="button" aria-haspopup="dialog" hidden { "Other dates here" } "\n"
        dialog id="dates" class="dates" aria-labelledby="dates-title" {
            h2 id="dates-title" { "Other dates here" } "\n"
            p id="dates-summary" role="status" {} "\n"
            div id="dates-list" {} "\n"
            form method="dialog" { button type="submit" { "Close" } } "\n"
        }
    }
}

/// The comparison of two images (`dates.mjs`), over the viewer: the right image is drawn from
/// the curtain rightwards.
pub(crate) fn comparison() -> Markup {
    html! {
        section id="compare" class="compare" aria-labelledby="compare-title" hidden {
            "\n"
            h2 id="compare-title" class="visually-hidden" { "Two dates compared" } "\n"
            div class="compare-frame" {
                img id="compare-left" alt="";
                img id="compare-right" alt="";
                div id="compare-line" class="compare-line" aria-hidden="true" {}
            } "\n"
            div class="compare-bar" {
                span id="compare-left-date" {} "\n"
                label for="curtain" { "Curtain" } "\n"
                input id="curtain" type="range" min="0" max="100" step="1" value="50"; "\n"
                span id="compare-right-date" {} "\n"
                button id="compare-swap" type="button" { "Swap sides" } "\n"
                button id="compare-open" type="button" { "Show the other image" } "\n"
                button id="compare-close" type="button" { "Close the comparison" } "\n"
            }
        }
    }
}

/// The report dialog (`report.mjs`), which the "Report / request blurring" link opens: the
/// image shown, what is asked for, why and how to reach the sender, posted to `/report` with
/// that form's own token (its page is read first, as a browser would); the link without
/// JavaScript. For a signed-in owner of the image or an administrator, links to the image's
/// management pages (blurring, hiding and deleting) beside it.
pub(crate) fn report_dialog() -> Markup {
    html! {
        dialog id="report-dialog" class="report" aria-labelledby="report-title" {
            h2 id="report-title" { "Report this image" } "\n"
            p {
                "Ask the operator of this server to blur something in image " code id="report-image" {}
                " (a face, a licence plate, a house, a person) or to take it down. "
                "No account is needed; an administrator handles each request."
            } "\n"
            img id="report-thumb" alt="" width="256" height="192"; "\n"
            form id="report-form" method="post" action="/report" {
                "\n"
                fieldset {
                    legend { "What do you ask for?" }
                    label class="check" { input type="radio" name="kind" value="blur" checked; " Blur something" } " "
                    label class="check" { input type="radio" name="kind" value="remove"; " Remove the image" }
                } "\n"
                label class="check" id="report-view-row" {
                    input id="report-view" type="checkbox" name="in_view";
                    " Only the part of the picture in view"
                } "\n"
                label for="report-reason" { "What should be blurred, or why should the image be removed?" } "\n"
                textarea id="report-reason" name="reason" required maxlength=(MAX_REASON_CHARS) rows="3" {} "\n"
                label for="report-contact" { "How can we reach you? (optional: an email address or a phone number)" } "\n"
                input id="report-contact" name="contact" type="text" maxlength=(MAX_CONTACT_CHARS); "\n"
                p id="report-said" role="status" {} "\n"
                div class="dialog-buttons" {
                    a id="report-full" href="/report" { "Draw a box on the full form" } "\n"
                    button id="report-send" type="submit" { "Send the request" } "\n"
                    button id="report-cancel" type="button" { "Close" }
                }
            }
        } "\n"
        p id="manage" class="manage" hidden {
            a id="manage-blur" href="/dashboard/image" { "Edit this image's blurring" } " "
            a id="manage-takedown" href="/dashboard" { "Hide or delete it" }
        }
    }
}
