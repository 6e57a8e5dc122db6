//! The plan recorded again with each fused group as one node (`ostinato::fusion::rewrite`, shared with
//! the Vulkan backend), from the generated kernels' signatures, launches and arguments.

use ostinato::fusion::FusedLaunch;
use ostinato::Plan;

use super::source::FusedKernel;
use super::Group;

pub use ostinato::fusion::Rewritten;

/// Records `plan` again with `groups[i]` as one launch of `fused[i]` (see `ostinato::fusion::rewrite`).
pub fn rewrite(plan: &Plan, groups: &[Group], fused: &[FusedKernel]) -> Result<Rewritten, String> {
    let launches: Vec<FusedLaunch<'_>> = fused.iter().map(|f| FusedLaunch { sig: &f.sig, launch: f.launch, args: &f.args }).collect();
    ostinato::fusion::rewrite(plan, groups, &launches)
}
