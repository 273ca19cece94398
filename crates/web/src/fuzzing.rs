//! Entry points for the fuzz targets (`fuzz/`): the readers of the web forms' untrusted
//! bytes, as the pages run them, without a request, a session or a database.

use streetlevel_import::{RequestKind, Shares};

use crate::form::Form;

/// The body of the privacy-request form (`POST /report`) as the report page reads it: the
/// kind asked for and the box drawn (shares of the upright picture, checked to lie inside it),
/// or the sentence the page answers 400 with.
///
/// # Errors
///
/// What the page says when the kind is unknown or the box is not four numbers inside the
/// picture.
pub fn report_form(body: &[u8]) -> Result<(RequestKind, Option<Shares>), String> {
    crate::privacy::report_fields(&Form::parse_bytes(body))
}
