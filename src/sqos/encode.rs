//! Encoder: typed request / response → bytes. STUB: owned by the codec work.

use super::{Request, Response};

/// Encode a request: every fixed field as given, the names at their offsets.
pub fn encode_request(req: &Request) -> Vec<u8> {
    let _ = req;
    Vec::new()
}

pub fn encode_response(resp: &Response) -> Vec<u8> {
    let _ = resp;
    Vec::new()
}
