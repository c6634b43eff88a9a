//! Values that do not fit inside a keyspace entry.
//!
//! Small strings and integers live inside the entry itself (see `entry.rs`);
//! everything else is boxed here. The collection types join this enum as they
//! are implemented.

/// A boxed value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string longer than an entry can hold inline.
    Str(Vec<u8>),
}

impl Value {
    /// The name TYPE reports.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
        }
    }

    /// Approximate heap bytes owned by the value.
    pub fn heap_size(&self) -> usize {
        match self {
            Value::Str(s) => std::mem::size_of::<Value>() + s.capacity(),
        }
    }
}
