/*
 * probe.cu - see probe.h.  Queries the device count, the first device's
 * name, compute capability and memory, runs one trivial kernel (which
 * proves that the binary holds code for this GPU's architecture), and
 * creates then destroys a cuBLAS handle.  Owns nothing after it returns.
 */
#include "worker/cuda/probe.h"

#include <stdio.h>
#include <unistd.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#define WK_PROBE_MAGIC 0x5111CE

__global__ static void wk_cuda_probe_kernel(int *out)
{
	if (threadIdx.x == 0 && blockIdx.x == 0)
		*out = WK_PROBE_MAGIC;
}

/* Runs the kernel on the current device; writes its error into desc. */
static enum cm_status wk_cuda_probe_launch(char *desc, size_t len)
{
	int *dev = NULL, host = 0;
	cudaError_t err;

	err = cudaMalloc(&dev, sizeof(int));
	if (err == cudaSuccess) {
		wk_cuda_probe_kernel<<<1, 32>>>(dev);
		err = cudaGetLastError();
	}
	if (err == cudaSuccess)
		err = cudaMemcpy(&host, dev, sizeof(int), cudaMemcpyDeviceToHost);
	cudaFree(dev);
	if (err != cudaSuccess) {
		snprintf(desc, len, "cuda: probe kernel failed: %s (%s)",
			 cudaGetErrorName(err), cudaGetErrorString(err));
		return CM_EIO;
	}
	if (host != WK_PROBE_MAGIC) {
		snprintf(desc, len, "cuda: probe kernel wrote %#x, expected %#x",
			 (unsigned)host, (unsigned)WK_PROBE_MAGIC);
		return CM_EIO;
	}
	return CM_OK;
}

extern "C" enum cm_status wk_cuda_probe(char *desc, size_t len)
{
	enum cm_status st;
	cudaDeviceProp prop;
	cublasHandle_t handle = NULL;
	cublasStatus_t bst;
	cudaError_t err;
	size_t mem_free = 0, mem_total = 0;
	int count = 0, cublas_ver = 0;

	if (len > 0)
		desc[0] = '\0';
	err = cudaGetDeviceCount(&count);
	/* "insufficient driver" means no driver at all, or one too old for
	 * this runtime: only the second is a fault worth failing on */
	if (err == cudaErrorInsufficientDriver &&
	    access("/proc/driver/nvidia/version", F_OK) == 0) {
		snprintf(desc, len, "cuda: the NVIDIA driver is too old for "
			 "CUDA runtime %d: %s", CUDART_VERSION,
			 cudaGetErrorString(err));
		return CM_EIO;
	}
	if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver ||
	    (err == cudaSuccess && count == 0)) {
		snprintf(desc, len, "cuda: no device (%s)",
			 err == cudaSuccess ? "device count is 0"
					    : cudaGetErrorString(err));
		return CM_ENOTFOUND;
	}
	if (err != cudaSuccess) {
		snprintf(desc, len, "cuda: cudaGetDeviceCount failed: %s (%s)",
			 cudaGetErrorName(err), cudaGetErrorString(err));
		return CM_EIO;
	}
	err = cudaGetDeviceProperties(&prop, 0);
	if (err == cudaSuccess)
		err = cudaSetDevice(0);
	if (err == cudaSuccess)
		err = cudaMemGetInfo(&mem_free, &mem_total);
	if (err != cudaSuccess) {
		snprintf(desc, len, "cuda: querying device 0 failed: %s (%s)",
			 cudaGetErrorName(err), cudaGetErrorString(err));
		return CM_EIO;
	}
	st = wk_cuda_probe_launch(desc, len);
	if (st != CM_OK)
		return st;
	bst = cublasCreate(&handle);
	if (bst != CUBLAS_STATUS_SUCCESS) {
		snprintf(desc, len, "cuda: cublasCreate failed: %s",
			 cublasGetStatusString(bst));
		return CM_EIO;
	}
	bst = cublasGetVersion(handle, &cublas_ver);
	cublasDestroy(handle);
	if (bst != CUBLAS_STATUS_SUCCESS) {
		snprintf(desc, len, "cuda: cublasGetVersion failed: %s",
			 cublasGetStatusString(bst));
		return CM_EIO;
	}
	snprintf(desc, len,
		 "cuda: %d device(s); 0: %s, sm_%d%d, %zu MiB (%zu MiB free); "
		 "cuBLAS %d",
		 count, prop.name, prop.major, prop.minor, mem_total >> 20,
		 mem_free >> 20, cublas_ver);
	return CM_OK;
}
