//! The protobuf wire format: varints, field keys and length-delimited fields.

/// Wire type of a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireType {
    /// Varint (ints, bools).
    Varint = 0,
    /// 64-bit little-endian (double).
    Fixed64 = 1,
    /// Length-delimited (strings, bytes, messages, maps entries).
    Len = 2,
    /// 32-bit little-endian (float).
    Fixed32 = 5,
}

/// One field as read from the wire.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Raw<'a> {
    /// A varint.
    Varint(u64),
    /// A 64-bit value.
    Fixed64(u64),
    /// Length-delimited bytes.
    Len(&'a [u8]),
    /// A 32-bit value.
    Fixed32(u32),
}

/// Why bytes are not a protobuf message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The input ended inside a field.
    #[error("truncated protobuf message")]
    Truncated,
    /// A varint longer than 10 bytes.
    #[error("malformed varint")]
    Varint,
    /// Groups (wire types 3 and 4) or unknown wire types.
    #[error("unsupported wire type {0}")]
    WireType(u64),
}

/// Appends a varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a field key.
pub fn put_key(out: &mut Vec<u8>, field: u32, wire: WireType) {
    put_varint(out, (u64::from(field) << 3) | wire as u64);
}

/// Appends a length-delimited field.
pub fn put_bytes(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_key(out, field, WireType::Len);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Appends a varint field.
pub fn put_varint_field(out: &mut Vec<u8>, field: u32, v: u64) {
    put_key(out, field, WireType::Varint);
    put_varint(out, v);
}

/// Reads a varint at `pos`, advancing it.
pub fn varint(buf: &[u8], pos: &mut usize) -> Result<u64, WireError> {
    let mut v = 0u64;
    for i in 0..10 {
        let b = *buf.get(*pos).ok_or(WireError::Truncated)?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Ok(v);
        }
    }
    Err(WireError::Varint)
}

/// Reads every field of a message, in wire order.
pub fn fields(buf: &[u8]) -> Result<Vec<(u32, Raw<'_>)>, WireError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let key = varint(buf, &mut pos)?;
        let field = (key >> 3) as u32;
        let raw = match key & 7 {
            0 => Raw::Varint(varint(buf, &mut pos)?),
            1 => {
                let b = buf.get(pos..pos + 8).ok_or(WireError::Truncated)?;
                pos += 8;
                Raw::Fixed64(u64::from_le_bytes(
                    b.try_into().map_err(|_| WireError::Truncated)?,
                ))
            }
            2 => {
                let len = varint(buf, &mut pos)? as usize;
                let end = pos.checked_add(len).ok_or(WireError::Truncated)?;
                let b = buf.get(pos..end).ok_or(WireError::Truncated)?;
                pos = end;
                Raw::Len(b)
            }
            5 => {
                let b = buf.get(pos..pos + 4).ok_or(WireError::Truncated)?;
                pos += 4;
                Raw::Fixed32(u32::from_le_bytes(
                    b.try_into().map_err(|_| WireError::Truncated)?,
                ))
            }
            other => return Err(WireError::WireType(other)),
        };
        out.push((field, raw));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        let mut buf = Vec::new();
        put_varint_field(&mut buf, 1, 300);
        put_bytes(&mut buf, 2, b"hi");
        put_varint_field(&mut buf, 3, u64::MAX);
        let f = fields(&buf).expect("parse");
        assert_eq!(
            f,
            vec![
                (1, Raw::Varint(300)),
                (2, Raw::Len(b"hi")),
                (3, Raw::Varint(u64::MAX))
            ]
        );
        assert_eq!(fields(&buf[..buf.len() - 1]), Err(WireError::Truncated));
        assert_eq!(fields(&[0x0b]), Err(WireError::WireType(3)));
    }
}
