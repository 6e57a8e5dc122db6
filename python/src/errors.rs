//! Ostinato's Python exceptions: `ostinato.Error` and one subclass per error kind, chosen from the
//! error's kind (never from its message), so `except ostinato.StateError:` catches exactly the calls
//! refused for the exec's state.

use ostinato::ErrorKind;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(_ostinato, Error, PyException, "Everything Ostinato refuses: the message names the file:line, node, param, buffer or slot.");
create_exception!(_ostinato, GraphError, Error, "A recording call was refused (a bad slice, a wrong arg count, a duplicate name).");
create_exception!(_ostinato, FileError, Error, "A graph file could not be read or parsed.");
create_exception!(_ostinato, PlanError, Error, "Planning failed (a cycle through explicit edges, a graph past the planner's budget).");
create_exception!(_ostinato, ArgumentError, Error, "An argument out of its domain: an unknown name, a wrong type, a range outside its buffer.");
create_exception!(_ostinato, StateError, Error, "The call is not allowed now (a replay in flight, a faulted exec).");
create_exception!(_ostinato, BindError, Error, "A kernel could not be bound (no implementation, another signature, a compile error).");
create_exception!(_ostinato, UnsupportedError, Error, "The backend or device cannot run the plan as recorded (a launch past its limits).");
create_exception!(_ostinato, BackendMissingError, Error, "The backend, a runtime library it loads, or the device asked for is not there.");
create_exception!(_ostinato, DeviceError, Error, "The driver or device failed at run time.");
create_exception!(_ostinato, FaultError, Error, "A kernel faulted or replays missed their deadline: the exec refuses further use.");
create_exception!(_ostinato, MismatchError, Error, "A result differs from the host oracle.");
create_exception!(_ostinato, IoError, Error, "A file could not be read or written, or memory could not be had.");

/// An error with a kind: what [`err`] turns into the exception of that kind.
pub trait Classified: std::fmt::Display {
    fn error_kind(&self) -> ErrorKind;
}

macro_rules! classified {
    ($($t:ty),+) => {
        $(impl Classified for $t {
            fn error_kind(&self) -> ErrorKind {
                self.kind()
            }
        })+
    };
}

classified!(
    ostinato_runtime::RuntimeError,
    ostinato::GraphError,
    ostinato::PlanError,
    ostinato::SlotError,
    ostinato::contract::ContractError,
    ostinato_llama::LlamaError
);

impl Classified for ostinato::file::FileError {
    fn error_kind(&self) -> ErrorKind {
        ErrorKind::File
    }
}

/// A message of the shell's own: an argument Python gave that the shell refuses.
impl Classified for String {
    fn error_kind(&self) -> ErrorKind {
        ErrorKind::Argument
    }
}

/// A refusal of the shell's own, of a kind it names (a kernel bound nowhere: `Bind`).
pub struct Refusal {
    pub kind: ErrorKind,
    pub message: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl Classified for Refusal {
    fn error_kind(&self) -> ErrorKind {
        self.kind
    }
}

impl Classified for &str {
    fn error_kind(&self) -> ErrorKind {
        ErrorKind::Argument
    }
}

/// The Python exception for `e`: the subclass of `ostinato.Error` of its kind.
pub fn err(e: impl Classified) -> PyErr {
    let message = e.to_string();
    match e.error_kind() {
        ErrorKind::Graph => GraphError::new_err(message),
        ErrorKind::File => FileError::new_err(message),
        ErrorKind::Plan => PlanError::new_err(message),
        ErrorKind::Argument => ArgumentError::new_err(message),
        ErrorKind::State => StateError::new_err(message),
        ErrorKind::Bind => BindError::new_err(message),
        ErrorKind::Unsupported => UnsupportedError::new_err(message),
        ErrorKind::BackendMissing => BackendMissingError::new_err(message),
        ErrorKind::Runtime => DeviceError::new_err(message),
        ErrorKind::Fault => FaultError::new_err(message),
        ErrorKind::Mismatch => MismatchError::new_err(message),
        ErrorKind::Io => IoError::new_err(message),
        _ => Error::new_err(message),
    }
}

/// Adds `ostinato.Error` and its subclasses to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("GraphError", py.get_type::<GraphError>())?;
    m.add("FileError", py.get_type::<FileError>())?;
    m.add("PlanError", py.get_type::<PlanError>())?;
    m.add("ArgumentError", py.get_type::<ArgumentError>())?;
    m.add("StateError", py.get_type::<StateError>())?;
    m.add("BindError", py.get_type::<BindError>())?;
    m.add("UnsupportedError", py.get_type::<UnsupportedError>())?;
    m.add("BackendMissingError", py.get_type::<BackendMissingError>())?;
    m.add("DeviceError", py.get_type::<DeviceError>())?;
    m.add("FaultError", py.get_type::<FaultError>())?;
    m.add("MismatchError", py.get_type::<MismatchError>())?;
    m.add("IoError", py.get_type::<IoError>())?;
    Ok(())
}
