// The subset of the Neuron runtime C API (libnrt) that Pagoda uses, declared from the public API
// documentation (aws-neuron-sdk nrt.h / nrt_status.h / nrt_experimental.h / nrt_version.h).
// Nothing from the SDK is vendored: only the C types and function signatures below. Pagoda never
// links -lnrt; the functions are resolved with dlsym into an NrtApi table (nrt_loader.h).
// tests/kernels/neuron/fake_nrt.cc implements the same signatures.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

typedef int NRT_STATUS;  // values: NrtCode below
typedef struct nrt_model nrt_model_t;
typedef struct nrt_tensor nrt_tensor_t;
typedef void nrt_tensor_set_t;

typedef enum {
  NRT_TENSOR_PLACEMENT_DEVICE,
  NRT_TENSOR_PLACEMENT_HOST,
  NRT_TENSOR_PLACEMENT_VIRTUAL
} nrt_tensor_placement_t;

typedef enum { NRT_FRAMEWORK_TYPE_INVALID = 0, NRT_FRAMEWORK_TYPE_NO_FW = 1 } nrt_framework_type_t;

typedef enum nrt_dtype {
  NRT_DTYPE_UNKNOWN = 0x0,
  NRT_DTYPE_UINT64 = 0x1,
  NRT_DTYPE_INT8 = 0x2,
  NRT_DTYPE_UINT8 = 0x3,
  NRT_DTYPE_INT16 = 0x4,
  NRT_DTYPE_UINT16 = 0x5,
  NRT_DTYPE_BFLOAT16 = 0x6,
  NRT_DTYPE_FLOAT16 = 0x7,
  NRT_DTYPE_INT32 = 0x8,
  NRT_DTYPE_UINT32 = 0x9,
  NRT_DTYPE_FLOAT32 = 0xA,
  NRT_DTYPE_FP32R = 0xB,
  NRT_DTYPE_INT64 = 0xC,
  NRT_DTYPE_FP8_E3 = 0xD,
  NRT_DTYPE_FP8_E4 = 0xE,
  NRT_DTYPE_FP8_E5 = 0xF,
} nrt_dtype_t;

typedef enum nrt_tensor_usage {
  NRT_TENSOR_USAGE_INPUT = 0,
  NRT_TENSOR_USAGE_OUTPUT
} nrt_tensor_usage_t;

#define NRT_TENSOR_NAME_MAX 256
typedef struct nrt_tensor_info {
  char name[NRT_TENSOR_NAME_MAX];
  nrt_tensor_usage_t usage;
  size_t size;
  nrt_dtype_t dtype;
  uint32_t* shape;
  uint32_t ndim;
} nrt_tensor_info_t;

typedef struct nrt_tensor_info_array {
  uint64_t tensor_count;
  nrt_tensor_info_t tensor_array[];
} nrt_tensor_info_array_t;

typedef struct nrt_version {
  uint64_t rt_major, rt_minor, rt_patch, rt_maintenance;
  char rt_detail[128];
  char git_hash[64];
} nrt_version_t;

typedef struct nrt_vnc_memory_stats {
  size_t bytes_used;
  size_t bytes_limit;
} nrt_vnc_memory_stats_t;

}  // extern "C"

namespace pagoda::neuron {

// NRT_STATUS values (nrt_status.h).
enum NrtCode : int {
  kNrtSuccess = 0,
  kNrtFailure = 1,
  kNrtInvalid = 2,
  kNrtInvalidHandle = 3,
  kNrtResource = 4,
  kNrtTimeout = 5,
  kNrtHwError = 6,
  kNrtQueueFull = 7,
  kNrtLoadNotEnoughNc = 9,
  kNrtUnsupportedNeffVersion = 10,
  kNrtFailHostMemAlloc = 11,
  kNrtUninitialized = 13,
  kNrtClosed = 14,
  kNrtQueueEmpty = 15,
  kNrtExecUnitUnrecoverable = 101,
  kNrtExecBadInput = 1002,
  kNrtExecCompletedWithNumErr = 1003,
  kNrtExecCompletedWithErr = 1004,
  kNrtExecNcBusy = 1005,
  kNrtExecOob = 1006,
  kNrtCollPending = 1100,
};

// Function pointer table. Required entries are never null after a successful LoadNrt; optional
// ones (marked) may be null when the installed libnrt lacks them.
struct NrtApi {
  NRT_STATUS (*init)(nrt_framework_type_t, const char*, const char*) = nullptr;
  void (*close)() = nullptr;
  NRT_STATUS (*load)(const void*, size_t, int32_t, int32_t, nrt_model_t**) = nullptr;
  NRT_STATUS (*unload)(nrt_model_t*) = nullptr;
  NRT_STATUS (*allocate_tensor_set)(nrt_tensor_set_t**) = nullptr;
  void (*destroy_tensor_set)(nrt_tensor_set_t**) = nullptr;
  NRT_STATUS (*add_tensor_to_tensor_set)(nrt_tensor_set_t*, const char*, nrt_tensor_t*) = nullptr;
  NRT_STATUS (*execute)(nrt_model_t*, const nrt_tensor_set_t*, nrt_tensor_set_t*) = nullptr;
  NRT_STATUS(*tensor_allocate)
  (nrt_tensor_placement_t, int, size_t, const char*, nrt_tensor_t**) = nullptr;
  void (*tensor_free)(nrt_tensor_t**) = nullptr;
  NRT_STATUS (*tensor_read)(const nrt_tensor_t*, void*, size_t, size_t) = nullptr;
  NRT_STATUS (*tensor_write)(nrt_tensor_t*, const void*, size_t, size_t) = nullptr;
  NRT_STATUS (*tensor_memset)(nrt_tensor_t*, uint64_t, int, size_t) = nullptr;
  NRT_STATUS (*tensor_copy)(const nrt_tensor_t*, size_t, nrt_tensor_t*, size_t, size_t) = nullptr;
  NRT_STATUS (*get_model_tensor_info)(nrt_model_t*, nrt_tensor_info_array_t**) = nullptr;
  NRT_STATUS (*free_model_tensor_info)(nrt_tensor_info_array_t*) = nullptr;
  // Optional.
  NRT_STATUS (*get_version)(nrt_version_t*, size_t) = nullptr;
  NRT_STATUS (*get_visible_vnc_count)(uint32_t*) = nullptr;
  NRT_STATUS (*get_vnc_memory_stats)(uint32_t, nrt_vnc_memory_stats_t*, size_t, size_t*) = nullptr;
  const char* (*get_status_as_str)(NRT_STATUS) = nullptr;
};

}  // namespace pagoda::neuron
