// A syntax-check shim (g++ -fsyntax-only): CUDA's keywords, types, intrinsics and runtime API declared
// enough for the probe's host and device code to parse and type-check. Not a CUDA implementation.
#pragma once
#include <cstddef>
#include <cmath>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __CUDA_ARCH__ 900
struct uint4 { unsigned x, y, z, w; }; struct uint2 { unsigned x, y; }; struct float4 { float x, y, z, w; }; struct float2 { float x, y; };
struct uint3 { unsigned x, y, z; };
struct dim3 { unsigned x, y, z; dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {} };
extern uint3 threadIdx, blockIdx; extern dim3 blockDim, gridDim;
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
inline uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
inline float2 make_float2(float a, float b) { return {a, b}; }
float __uint_as_float(unsigned); unsigned __float_as_uint(float);
float __shfl_xor_sync(unsigned, float, int); unsigned __shfl_xor_sync(unsigned, unsigned, int);
float __shfl_sync(unsigned, float, int); unsigned __shfl_sync(unsigned, unsigned, int);
template <class T> T __ldcg(const T*); template <class T> T __ldg(const T*);
float rsqrtf(float); void sincosf(float, float*, float*);
unsigned atomicAdd(unsigned*, unsigned); float atomicAdd(float*, float); unsigned atomicExch(unsigned*, unsigned);
void __syncthreads(); void __syncwarp(); void __threadfence(); void __nanosleep(unsigned);
size_t __cvta_generic_to_shared(const void*);
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; } inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
typedef int cudaError_t; const int cudaSuccess = 0; typedef struct CUst* cudaStream_t; typedef struct CUg* cudaGraph_t; typedef struct CUge* cudaGraphExec_t;
typedef struct CUev* cudaEvent_t;
enum { cudaStreamNonBlocking = 1, cudaStreamCaptureModeGlobal = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaDevAttrMultiProcessorCount = 16,
       cudaFuncAttributeMaxDynamicSharedMemorySize = 8, cudaLaunchAttributeProgrammaticStreamSerialization = 5 };
struct cudaFuncAttributes { size_t sharedSizeBytes, localSizeBytes; int numRegs; };
struct cudaLaunchAttributeValue { int programmaticStreamSerializationAllowed; };
struct cudaLaunchAttribute { int id; cudaLaunchAttributeValue val; };
struct cudaLaunchConfig_t { dim3 gridDim, blockDim; size_t dynamicSmemBytes; cudaStream_t stream; cudaLaunchAttribute* attrs; unsigned numAttrs; };
template <class... P, class... A> cudaError_t cudaLaunchKernelEx(const cudaLaunchConfig_t*, void (*)(P...), A...);
const char* cudaGetErrorString(cudaError_t);
cudaError_t cudaMalloc(void*, size_t); template <class T> cudaError_t cudaMalloc(T**, size_t);
cudaError_t cudaMemset(void*, int, size_t); cudaError_t cudaMemcpy(void*, const void*, size_t, int);
template <class T> cudaError_t cudaMemcpyFromSymbol(void*, const T&, size_t);
cudaError_t cudaDeviceSynchronize(); cudaError_t cudaGetLastError(); cudaError_t cudaStreamCreate(cudaStream_t*); cudaError_t cudaStreamCreateWithFlags(cudaStream_t*, int);
cudaError_t cudaStreamDestroy(cudaStream_t); cudaError_t cudaStreamSynchronize(cudaStream_t);
cudaError_t cudaStreamBeginCapture(cudaStream_t, int); cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t*);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t*, cudaGraph_t, unsigned long long); cudaError_t cudaGraphLaunch(cudaGraphExec_t, cudaStream_t);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t); cudaError_t cudaGraphDestroy(cudaGraph_t);
cudaError_t cudaEventCreate(cudaEvent_t*); cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t); cudaError_t cudaEventSynchronize(cudaEvent_t);
cudaError_t cudaEventElapsedTime(float*, cudaEvent_t, cudaEvent_t);
cudaError_t cudaDeviceGetAttribute(int*, int, int); cudaError_t cudaFuncSetAttribute(const void*, int, int);
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes*, const void*); cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int*, const void*, int, size_t);
// <<<grid, block>>> is not C++: the probe's one such launch is rewritten by the check script.
