//! What the driver reports of a loaded function (`cuFuncGetAttribute`), for the build manifest.

use cudarc::driver::sys;

use super::Function;
use crate::error::Result;

impl Function {
    /// Registers per thread, local (spill) bytes per thread, static shared bytes, constant bytes, most
    /// threads per block, PTX and binary versions.
    pub(crate) fn resources(&self) -> Result<Vec<(&'static str, i64)>> {
        use sys::CUfunction_attribute as A;
        let attrs = [
            ("registers", A::CU_FUNC_ATTRIBUTE_NUM_REGS),
            ("local_bytes", A::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
            ("static_shared_bytes", A::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
            ("const_bytes", A::CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES),
            ("max_threads_per_block", A::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
            ("ptx_version", A::CU_FUNC_ATTRIBUTE_PTX_VERSION),
            ("binary_version", A::CU_FUNC_ATTRIBUTE_BINARY_VERSION),
        ];
        attrs.into_iter().map(|(name, attr)| Ok((name, i64::from(self.attribute(attr)?)))).collect()
    }
}
