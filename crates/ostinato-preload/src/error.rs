//! Why reading a graph back failed: each error names the driver call and carries the driver's code
//! with its name.

/// A failure of the read-back (a driver call, a bound, a value out of its domain).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// A driver call returned an error.
    #[error("{op} failed: {name} ({code})")]
    Driver { op: &'static str, code: i32, name: &'static str },
    /// The driver entry point was never resolved (the driver did not offer it).
    #[error("{op}: the driver offers no such entry point")]
    Unresolved { op: &'static str },
    /// An input-sized quantity past its bound.
    #[error("{what}: {count} is past the bound of {limit}")]
    Bound { what: &'static str, count: usize, limit: usize },
    /// A value the driver returned that cannot be used.
    #[error("{op}: {reason}")]
    Invalid { op: &'static str, reason: String },
}

impl ReadError {
    /// The error of driver call `op` returning `code`.
    pub fn driver(op: &'static str, code: i32) -> ReadError {
        ReadError::Driver { op, code, name: result_name(code) }
    }

    /// Whether this is the driver's `CUDA_ERROR_INVALID_VALUE`.
    pub fn is_invalid_value(&self) -> bool {
        matches!(self, ReadError::Driver { code: 1, .. })
    }
}

/// The name of a `CUresult` (the codes of `cuda.h`; others are `CUDA_ERROR_<code>`).
pub fn result_name(code: i32) -> &'static str {
    match code {
        0 => "CUDA_SUCCESS",
        1 => "CUDA_ERROR_INVALID_VALUE",
        2 => "CUDA_ERROR_OUT_OF_MEMORY",
        3 => "CUDA_ERROR_NOT_INITIALIZED",
        4 => "CUDA_ERROR_DEINITIALIZED",
        101 => "CUDA_ERROR_INVALID_DEVICE",
        200 => "CUDA_ERROR_INVALID_IMAGE",
        201 => "CUDA_ERROR_INVALID_CONTEXT",
        209 => "CUDA_ERROR_NO_BINARY_FOR_GPU",
        218 => "CUDA_ERROR_INVALID_PTX",
        400 => "CUDA_ERROR_INVALID_HANDLE",
        500 => "CUDA_ERROR_NOT_FOUND",
        700 => "CUDA_ERROR_ILLEGAL_ADDRESS",
        801 => "CUDA_ERROR_NOT_SUPPORTED",
        900 => "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
        901 => "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
        906 => "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
        999 => "CUDA_ERROR_UNKNOWN",
        _ => "CUDA_ERROR_(unnamed here)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_driver_error_names_the_call_and_the_code() {
        let e = ReadError::driver("cuGraphGetNodes", 400);
        assert_eq!(e.to_string(), "cuGraphGetNodes failed: CUDA_ERROR_INVALID_HANDLE (400)");
        assert!(ReadError::driver("cuFuncGetParamInfo", 1).is_invalid_value());
        assert!(!e.is_invalid_value());
    }
}
