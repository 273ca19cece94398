//! XMP: whether the Google Photo Sphere property `GPano:ProjectionType` says the image is an
//! equirectangular panorama, in attribute or element form.

use quick_xml::NsReader;
use quick_xml::events::Event;
use quick_xml::name::{Namespace, ResolveResult};

/// The namespace of the `GPano` properties; the prefix may be any.
pub(crate) const GPANO_NAMESPACE: &str = "http://ns.google.com/photos/1.0/panorama/";

/// Whether `xmp` sets `GPano:ProjectionType` to `equirectangular` (ASCII case ignored), either
/// as an attribute (`<rdf:Description GPano:ProjectionType="equirectangular"/>`) or as an
/// element (`<GPano:ProjectionType>equirectangular</GPano:ProjectionType>`).
///
/// XML that stops parsing (XMP written by cameras is not always well-formed) counts for what
/// was read before the error: XMP is a hint here, never a reason to refuse an image.
pub(crate) fn is_equirectangular(xmp: &[u8]) -> bool {
    let mut reader = NsReader::from_reader(xmp);
    let mut in_projection_type = false;
    loop {
        let Ok((namespace, event)) = reader.read_resolved_event() else {
            return false;
        };
        let element_is_gpano = is_gpano(&namespace);
        match event {
            Event::Start(element) | Event::Empty(element) => {
                in_projection_type =
                    element_is_gpano && element.local_name().as_ref() == "ProjectionType";
                for attribute in element.attributes().flatten() {
                    let (namespace, local_name) =
                        reader.resolver().resolve_attribute(attribute.key);
                    if is_gpano(&namespace)
                        && local_name.as_ref() == "ProjectionType"
                        && is_equirectangular_value(&attribute.value)
                    {
                        return true;
                    }
                }
            }
            Event::Text(text) if in_projection_type && is_equirectangular_value(&text) => {
                return true;
            }
            Event::End(_) => in_projection_type = false,
            Event::Eof => return false,
            _ => {}
        }
    }
}

fn is_gpano(namespace: &ResolveResult<'_>) -> bool {
    matches!(namespace, ResolveResult::Bound(Namespace(uri)) if *uri == GPANO_NAMESPACE)
}

fn is_equirectangular_value(raw: &str) -> bool {
    raw.trim_ascii().eq_ignore_ascii_case("equirectangular")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(xmp: &str, expected: bool) {
        assert_eq!(is_equirectangular(xmp.as_bytes()), expected, "{xmp}");
    }

    #[test]
    fn reads_attribute_and_element_forms_in_the_gpano_namespace() {
        let open = r#"<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">"#;
        let close = "</rdf:RDF></x:xmpmeta>";
        check(
            &format!(
                r#"{open}<rdf:Description xmlns:GPano="http://ns.google.com/photos/1.0/panorama/" GPano:ProjectionType="equirectangular"/>{close}"#
            ),
            true,
        );
        check(
            &format!(
                r#"{open}<rdf:Description xmlns:g="http://ns.google.com/photos/1.0/panorama/"><g:ProjectionType> Equirectangular </g:ProjectionType></rdf:Description>{close}"#
            ),
            true,
        );
        check(
            &format!(
                r#"{open}<rdf:Description xmlns:GPano="http://ns.google.com/photos/1.0/panorama/" GPano:ProjectionType="cylindrical"/>{close}"#
            ),
            false,
        );
        // The right local name in another namespace, and text outside the element.
        check(
            &format!(
                r#"{open}<rdf:Description xmlns:GPano="urn:other" GPano:ProjectionType="equirectangular"/>{close}"#
            ),
            false,
        );
        check(
            &format!(
                r#"{open}<rdf:Description xmlns:GPano="http://ns.google.com/photos/1.0/panorama/"><GPano:UsePanoramaViewer>True</GPano:UsePanoramaViewer>equirectangular</rdf:Description>{close}"#
            ),
            false,
        );
    }

    #[test]
    fn broken_xml_is_read_up_to_the_error() {
        check(
            r#"<a xmlns:GPano="http://ns.google.com/photos/1.0/panorama/" GPano:ProjectionType="equirectangular"><b></c>"#,
            true,
        );
        check("<a><b></c>", false);
        check("", false);
        check("\u{0}\u{ff}<<<", false);
    }
}
