//! The wire protocol: request parsing and reply encoding.

pub mod parser;
pub mod reply;

pub use parser::{leading_keys, split_args, ParseLimits, ProtocolError, QueryBuffer, ARG_LEN_MAX};
pub use reply::{Proto, Reply};
