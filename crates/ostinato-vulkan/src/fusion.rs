//! Chain fusion on Vulkan (placeholder).

use std::sync::Arc;

use ostinato::fusion::FusionMode;
use ostinato::Plan;

use crate::build::NodeLayout;
use crate::ffi::Context;
use crate::kernel::VulkanKernel;
use crate::VkError;

pub(crate) struct FusedDispatch {
    pub(crate) layout: NodeLayout,
}

pub(crate) struct FusedPlan {
    pub(crate) plan: Plan,
    pub(crate) kernels: Vec<VulkanKernel>,
    pub(crate) dispatches: Vec<Option<FusedDispatch>>,
    pub(crate) fused_nodes: usize,
}

pub(crate) fn fuse(_ctx: &Arc<Context>, _plan: &Plan, _kernels: &[VulkanKernel], _mode: FusionMode) -> Result<Option<FusedPlan>, VkError> {
    Ok(None)
}
