//! Option values with names (a shell's choices, the names reports print): an enum lists its values
//! once in [`Named::ALL`], and parsing is derived from the names, so no second list can drift.

/// A named option value.
pub trait Named: Sized + Copy + 'static {
    /// Every value, in the order help texts list them.
    const ALL: &'static [Self];
    /// The value's name.
    fn name(self) -> &'static str;
    /// The value called `s`.
    fn from_name(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|v| v.name() == s)
    }
    /// Every value's name.
    fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|v| v.name()).collect()
    }
}
