//! The code images the process loaded, kept by content hash (one copy of an image cudart registers and
//! then loads lazily through `cuLibraryLoadData`), within a byte budget, with the map from each
//! `CUmodule` and `CUlibrary` the driver returned to its image. The driver offers no call that
//! returns a loaded image, so this copy is the only way to read a kernel's code later.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use serde::Serialize;

/// The most module and library handles mapped (a bound on memory; past it a handle's code is unknown).
pub const MAX_HANDLES: usize = 1 << 20;

/// An image's content hash (BLAKE3).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ImageId(blake3::Hash);

impl ImageId {
    pub fn of(bytes: &[u8]) -> ImageId {
        ImageId(blake3::hash(bytes))
    }
}

impl fmt::Display for ImageId {
    /// The first 16 hex digits (what logs show).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.to_hex()[..16])
    }
}

impl fmt::Debug for ImageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ImageId({self})")
    }
}

/// Which call handed the driver an image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Origin {
    #[serde(rename = "__cudaRegisterFatBinary")]
    RegisterFatBinary,
    #[serde(rename = "cuModuleLoadData")]
    ModuleLoadData,
    #[serde(rename = "cuModuleLoadDataEx")]
    ModuleLoadDataEx,
    #[serde(rename = "cuModuleLoadFatBinary")]
    ModuleLoadFatBinary,
    #[serde(rename = "cuLibraryLoadData")]
    LibraryLoadData,
}

/// One kept image.
#[derive(Debug)]
pub struct Image {
    pub id: ImageId,
    pub bytes: Vec<u8>,
    /// The first call that handed it over.
    pub origin: Origin,
}

/// What is known of a handle's image.
#[derive(Clone, Debug)]
pub enum Held {
    Kept(Arc<Image>),
    /// Seen but not kept: why (over the budget, too large, unreadable).
    NotKept(String),
}

/// A handle the driver gave for a loaded image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Handle {
    Module(u64),
    Library(u64),
}

/// The kept images and the handle map.
#[derive(Debug)]
pub struct Store {
    images: HashMap<ImageId, Arc<Image>>,
    held_bytes: usize,
    budget: usize,
    handles: HashMap<Handle, Held>,
}

impl Store {
    /// A store that keeps at most `budget` bytes of images.
    pub fn new(budget: usize) -> Store {
        Store { images: HashMap::new(), held_bytes: 0, budget, handles: HashMap::new() }
    }

    /// Keeps a copy of `bytes` (once per content), or says why not.
    pub fn keep(&mut self, bytes: &[u8], origin: Origin) -> Held {
        let id = ImageId::of(bytes);
        if let Some(image) = self.images.get(&id) {
            return Held::Kept(image.clone());
        }
        let after = self.held_bytes.saturating_add(bytes.len());
        if after > self.budget {
            return Held::NotKept(format!("image {id} ({} bytes) is past the {} bytes kept (OSTINATO_PRELOAD_IMAGE_BUDGET)", bytes.len(), self.budget));
        }
        let image = Arc::new(Image { id, bytes: bytes.to_vec(), origin });
        self.images.insert(id, image.clone());
        self.held_bytes = after;
        Held::Kept(image)
    }

    /// Maps a handle the driver returned to its image (replacing what a reused handle held).
    pub fn bind(&mut self, handle: Handle, held: Held) {
        if self.handles.len() < MAX_HANDLES || self.handles.contains_key(&handle) {
            self.handles.insert(handle, held);
        }
    }

    /// Forgets an unloaded handle (the driver may hand its value out again).
    pub fn unbind(&mut self, handle: Handle) {
        self.handles.remove(&handle);
    }

    pub fn lookup(&self, handle: Handle) -> Option<&Held> {
        self.handles.get(&handle)
    }

    /// Images kept and their bytes.
    pub fn held(&self) -> (usize, usize) {
        (self.images.len(), self.held_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_is_kept_once_per_content() {
        let mut s = Store::new(100);
        let a = s.keep(b"abc", Origin::RegisterFatBinary);
        let b = s.keep(b"abc", Origin::LibraryLoadData);
        let (Held::Kept(a), Held::Kept(b)) = (a, b) else { panic!("both kept") };
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(b.origin, Origin::RegisterFatBinary, "the first origin stays");
        assert_eq!(s.held(), (1, 3));
        assert_eq!(a.id.to_string().len(), 16);
    }

    #[test]
    fn the_budget_bounds_what_is_kept() {
        let mut s = Store::new(5);
        assert!(matches!(s.keep(b"abcd", Origin::ModuleLoadData), Held::Kept(_)));
        let Held::NotKept(why) = s.keep(b"efgh", Origin::ModuleLoadData) else { panic!("over budget") };
        assert!(why.contains("OSTINATO_PRELOAD_IMAGE_BUDGET"), "{why}");
        assert_eq!(s.held(), (1, 4));
    }

    #[test]
    fn handles_map_to_images_until_unloaded() {
        let mut s = Store::new(100);
        let held = s.keep(b"x", Origin::ModuleLoadData);
        s.bind(Handle::Module(7), held);
        assert!(matches!(s.lookup(Handle::Module(7)), Some(Held::Kept(_))));
        assert!(s.lookup(Handle::Library(7)).is_none(), "modules and libraries are apart");
        s.unbind(Handle::Module(7));
        assert!(s.lookup(Handle::Module(7)).is_none());
    }
}
