//! Shared helpers of the Vulkan tests: open the device, or skip cleanly (with a message) where no
//! Vulkan device is found.

#![allow(dead_code)]

use std::sync::Arc;

use ostinato_vulkan::{Context, VulkanBackend};

/// The Vulkan context, or `None` after saying why `test` skips.
pub fn context_or_skip(test: &str) -> Option<Arc<Context>> {
    match Context::open() {
        Ok(c) => Some(c),
        Err(e) => {
            ostinato_testkit::skip(&format!("SKIP {test}: {e}"));
            None
        }
    }
}

/// A backend on the Vulkan context, or `None` after saying why `test` skips.
pub fn backend_or_skip(test: &str) -> Option<VulkanBackend> {
    context_or_skip(test).map(VulkanBackend::with_context)
}
