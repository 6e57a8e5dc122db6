//! The names of the CUDA backend's option values ([`ostinato::Named`]): each enum lists its values
//! once, here, and parsing is derived from the names (the build variants' [`ostinato_cuda_code::PdlTrigger`]
//! name theirs where they are defined).

use crate::lower::{MixedBuilds, PdlMode, ShapeMode};
use crate::options::{ExecMode, GraphBuild, LaunchOn, StreamPriority};
use ostinato::Named;

macro_rules! named {
    ($t:ty, [$($v:expr),+ $(,)?], $name:expr) => {
        impl Named for $t {
            const ALL: &'static [Self] = &[$($v),+];
            fn name(self) -> &'static str {
                $name(self)
            }
        }
    };
}

named!(ExecMode, [ExecMode::Graph, ExecMode::Eager], ExecMode::as_str);
named!(GraphBuild, [GraphBuild::Bulk, GraphBuild::InOrder, GraphBuild::Capture], GraphBuild::as_str);
named!(StreamPriority, [StreamPriority::Default, StreamPriority::High], |p| match p {
    StreamPriority::Default => "default",
    StreamPriority::High => "high",
});
named!(LaunchOn, [LaunchOn::Caller, LaunchOn::Thread { spin: LaunchOn::DEFAULT_SPIN }], LaunchOn::as_str);
named!(PdlMode, [PdlMode::Auto, PdlMode::On, PdlMode::Off], PdlMode::as_str);
named!(ShapeMode, [ShapeMode::Auto, ShapeMode::Plan, ShapeMode::Lanes], ShapeMode::as_str);
named!(MixedBuilds, [MixedBuilds::Off, MixedBuilds::Plain, MixedBuilds::Early, MixedBuilds::All], |m| match m {
    MixedBuilds::Off => "off",
    MixedBuilds::Plain => "plain",
    MixedBuilds::Early => "early",
    MixedBuilds::All => "all",
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fusion::FusionMode;
    use ostinato_cuda_code::PdlTrigger;

    fn round_trips<T: Named + PartialEq + std::fmt::Debug>() {
        let mut names = T::names();
        for v in T::ALL {
            assert_eq!(T::from_name(v.name()), Some(*v));
        }
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "two values share a name");
        assert_eq!(T::from_name("no-such-value"), None);
    }

    #[test]
    fn every_value_is_found_by_its_name_and_names_are_unique() {
        round_trips::<ExecMode>();
        round_trips::<GraphBuild>();
        round_trips::<StreamPriority>();
        round_trips::<LaunchOn>();
        round_trips::<PdlTrigger>();
        round_trips::<PdlMode>();
        round_trips::<ShapeMode>();
        round_trips::<FusionMode>();
        round_trips::<MixedBuilds>();
    }
}
