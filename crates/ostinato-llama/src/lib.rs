//! The Llama decode step on Ostinato: a Llama-family config (Llama-3.2-1B by default), one step
//! recorded as one graph of this crate's kernels (a kernel pack: CUDA C in `kernels/llama.cu`, host
//! twins in [`host`], bound through [`pack`]), its weights random from a seed or read from a Hugging
//! Face checkpoint.
//!
//! ```
//! use ostinato_llama::{record, LlamaConfig, StepOptions};
//! let step = record(&LlamaConfig::shrunk(64), StepOptions::default()).unwrap();
//! assert_eq!(step.dispatches, 2 + 5 * 2); // gather, five kernels per layer, LM head
//! let plan = ostinato::Plan::compile(&step.graph).unwrap();
//! assert_eq!(plan.lanes().count(), 1); // a chain: every kernel needs its predecessor's output
//! ```

mod checkpoint;
mod config;
pub mod host;
pub mod pack;
mod reference;
mod step;

pub use checkpoint::load as load_checkpoint;
pub use config::{LlamaConfig, RopeScaling};
pub use reference::{agree, greedy_token, Reference};
pub use step::{default_splits, record, LayerBuffers, LlamaStep, OutputProjection, StepOptions};

/// What can go wrong building the step or reading a checkpoint.
#[derive(Debug, thiserror::Error)]
pub enum LlamaError {
    #[error("llama config: `{field}` {reason}")]
    Config { field: String, reason: String },
    #[error("{path}: {reason}")]
    Checkpoint { path: String, reason: String },
    #[error("kernel `{kernel}`: {reason}")]
    Kernel { kernel: String, reason: String },
    #[error(transparent)]
    Graph(#[from] ostinato::GraphError),
}

impl LlamaError {
    /// The class of this failure.
    pub fn kind(&self) -> ostinato::ErrorKind {
        match self {
            LlamaError::Config { .. } => ostinato::ErrorKind::Argument,
            LlamaError::Checkpoint { .. } => ostinato::ErrorKind::File,
            LlamaError::Kernel { .. } => ostinato::ErrorKind::Bind,
            LlamaError::Graph(e) => e.kind(),
        }
    }
}
