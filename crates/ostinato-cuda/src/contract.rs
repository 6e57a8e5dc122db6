//! The CUDA side of the kernel contract.
