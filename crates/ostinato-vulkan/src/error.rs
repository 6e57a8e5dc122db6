//! The Vulkan backend's errors. Each variant is one class of failure, so [`VkError::kind`] is exact: it
//! reads the variant (and a driver call's `VkResult`), never the message.

use ostinato::{BindError, ErrorKind, SlotError, UsageError};

#[derive(Debug, thiserror::Error)]
pub enum VkError {
    #[error("no Vulkan loader found: {0}")]
    NoLoader(String),
    #[error("no Vulkan device {0}")]
    NoDevice(String),
    /// A driver call failed with `code` (the `VkResult`, named).
    #[error("{op} failed: {name} ({code})")]
    Vk { op: &'static str, code: i32, name: String },
    /// The device was lost (`VK_ERROR_DEVICE_LOST`): the exec that saw it is faulted.
    #[error("{op} failed: the Vulkan device was lost (VK_ERROR_DEVICE_LOST); the exec is faulted and refuses further use")]
    DeviceLost { op: &'static str },
    /// A wait gave up on replays that did not finish within the exec's deadline
    /// (`VulkanOptions::wait_timeout`): the exec is faulted and refuses every later call.
    #[error("{exec}: the replays did not finish within {ms} ms (the wait timeout); the exec is faulted and refuses further use")]
    Timeout { exec: String, ms: u128 },
    /// A kernel could not be bound: a compile error, bindings unlike the signature, no entry point.
    #[error("kernel `{kernel}`: {message}")]
    Shader { kernel: String, message: String },
    /// A declaration the kernel's code contradicts (the kernel contract, `access`).
    #[error(transparent)]
    Contract(Box<ostinato::contract::ContractError>),
    /// The workload uses something Vulkan (or this device) has no version of: a kernel without WGSL, a
    /// launch unlike the shader's workgroup or past the device's limits, a binding a module cannot take
    /// at its offset, a collective.
    #[error("not applicable: {0}")]
    NotApplicable(String),
    /// An argument out of its domain: an unknown buffer, an option, a copy or fill Vulkan cannot do.
    #[error("{0}")]
    Argument(String),
    /// A buffer param whose slice starts where no binding can reach it in whole elements of the
    /// shader's element type.
    #[error(transparent)]
    ElementOffset(Box<MisalignedSlice>),
    #[error(transparent)]
    Range(#[from] UsageError),
    /// A call the exec refuses in its present state (a faulted exec, one being dropped).
    #[error("{op}: {reason}")]
    State { op: &'static str, reason: String },
    /// An invariant of Ostinato's own broke (a bug: please report it).
    #[error("{op}: internal error: {reason}")]
    Internal { op: &'static str, reason: String },
    #[error(transparent)]
    Bind(#[from] BindError),
    #[error(transparent)]
    Slot(#[from] SlotError),
}

/// A slice no binding reaches in whole elements: the node, param and element type.
#[derive(Debug, thiserror::Error)]
#[error("node {node} (kernel `{kernel}`): param `{param}` starts at byte {start} of its buffer, not a whole number of {size}-byte `{element}` elements from a {align}-byte binding boundary")]
pub struct MisalignedSlice {
    pub node: String,
    pub kernel: String,
    pub param: String,
    pub element: String,
    pub size: u32,
    pub start: u64,
    pub align: u64,
}

impl VkError {
    /// The class of this failure (what the shells map to a status or an exception class).
    pub fn kind(&self) -> ErrorKind {
        use ash::vk::Result as R;
        match self {
            VkError::NoLoader(_) | VkError::NoDevice(_) => ErrorKind::BackendMissing,
            VkError::Vk { code, .. } if *code == R::ERROR_OUT_OF_HOST_MEMORY.as_raw() || *code == R::ERROR_OUT_OF_DEVICE_MEMORY.as_raw() => ErrorKind::Io,
            VkError::Vk { .. } | VkError::Internal { .. } => ErrorKind::Runtime,
            VkError::DeviceLost { .. } | VkError::Timeout { .. } => ErrorKind::Fault,
            VkError::Shader { .. } => ErrorKind::Bind,
            VkError::Contract(e) => e.kind(),
            VkError::NotApplicable(_) => ErrorKind::Unsupported,
            VkError::Argument(_) | VkError::ElementOffset(_) => ErrorKind::Argument,
            VkError::Range(e) => e.kind(),
            VkError::State { .. } => ErrorKind::State,
            VkError::Bind(e) => e.kind(),
            VkError::Slot(e) => e.kind(),
        }
    }

    /// Whether this error leaves the exec that saw it unusable (it then refuses every later call).
    pub fn faults(&self) -> bool {
        matches!(self, VkError::DeviceLost { .. } | VkError::Timeout { .. })
    }
}

/// The error of a failed Vulkan call `op`: [`VkError::DeviceLost`] for `VK_ERROR_DEVICE_LOST`, else
/// [`VkError::Vk`] with the code.
pub(crate) fn vkr(op: &'static str) -> impl Fn(ash::vk::Result) -> VkError {
    move |code| match code {
        ash::vk::Result::ERROR_DEVICE_LOST => VkError::DeviceLost { op },
        _ => VkError::Vk { op, code: code.as_raw(), name: format!("{code:?}") },
    }
}

impl From<ostinato::contract::ContractError> for VkError {
    fn from(e: ostinato::contract::ContractError) -> Self {
        VkError::Contract(Box::new(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_come_from_the_variant_and_the_code() {
        let lost = vkr("vkQueueSubmit")(ash::vk::Result::ERROR_DEVICE_LOST);
        assert!(matches!(lost, VkError::DeviceLost { .. }) && lost.kind() == ErrorKind::Fault && lost.faults());
        assert_eq!(vkr("vkAllocateMemory")(ash::vk::Result::ERROR_OUT_OF_DEVICE_MEMORY).kind(), ErrorKind::Io);
        assert_eq!(vkr("vkCreateBuffer")(ash::vk::Result::ERROR_UNKNOWN).kind(), ErrorKind::Runtime);
        assert_eq!(VkError::Timeout { exec: "e".into(), ms: 5 }.kind(), ErrorKind::Fault);
        assert_eq!(VkError::State { op: "replay", reason: "faulted".into() }.kind(), ErrorKind::State);
        assert_eq!(VkError::Internal { op: "x", reason: "y".into() }.kind(), ErrorKind::Runtime);
        assert_eq!(VkError::NotApplicable("x".into()).kind(), ErrorKind::Unsupported);
        assert_eq!(VkError::Argument("x".into()).kind(), ErrorKind::Argument);
        let slice = MisalignedSlice { node: "n0".into(), kernel: "k".into(), param: "x".into(), element: "vec2<f32>".into(), size: 8, start: 260, align: 16 };
        let e = VkError::ElementOffset(Box::new(slice));
        assert_eq!(e.kind(), ErrorKind::Argument);
        assert!(e.to_string().contains("node n0") && e.to_string().contains("`x`") && e.to_string().contains("vec2<f32>"), "{e}");
        let range = VkError::from(UsageError::UnknownBuffer { id: 3 });
        assert_eq!(range.kind(), ErrorKind::Argument);
    }
}
