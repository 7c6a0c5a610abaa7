#include "kernels/neuron/nrt_status.h"

namespace pagoda::neuron {

NrtAction ActionForStatus(NRT_STATUS s) {
  switch (s) {
    case kNrtSuccess:
      return NrtAction::kOk;
    case kNrtQueueFull:
      return NrtAction::kRetry;
    case kNrtExecBadInput:
    case kNrtExecCompletedWithNumErr:
    case kNrtExecOob:
      return NrtAction::kFailStep;
    default:
      return NrtAction::kFatal;  // incl. TIMEOUT (unhealthy), HW errors, bugs, unknown codes
  }
}

namespace {
const char* KnownName(NRT_STATUS s) {
  switch (s) {
    case kNrtSuccess:
      return "NRT_SUCCESS";
    case kNrtFailure:
      return "NRT_FAILURE";
    case kNrtInvalid:
      return "NRT_INVALID";
    case kNrtInvalidHandle:
      return "NRT_INVALID_HANDLE";
    case kNrtResource:
      return "NRT_RESOURCE";
    case kNrtTimeout:
      return "NRT_TIMEOUT";
    case kNrtHwError:
      return "NRT_HW_ERROR";
    case kNrtQueueFull:
      return "NRT_QUEUE_FULL";
    case kNrtLoadNotEnoughNc:
      return "NRT_LOAD_NOT_ENOUGH_NC";
    case kNrtUnsupportedNeffVersion:
      return "NRT_UNSUPPORTED_NEFF_VERSION";
    case kNrtFailHostMemAlloc:
      return "NRT_FAIL_HOST_MEM_ALLOC";
    case kNrtUninitialized:
      return "NRT_UNINITIALIZED";
    case kNrtClosed:
      return "NRT_CLOSED";
    case kNrtQueueEmpty:
      return "NRT_QUEUE_EMPTY";
    case kNrtExecUnitUnrecoverable:
      return "NRT_EXEC_UNIT_UNRECOVERABLE";
    case kNrtExecBadInput:
      return "NRT_EXEC_BAD_INPUT";
    case kNrtExecCompletedWithNumErr:
      return "NRT_EXEC_COMPLETED_WITH_NUM_ERR";
    case kNrtExecCompletedWithErr:
      return "NRT_EXEC_COMPLETED_WITH_ERR";
    case kNrtExecNcBusy:
      return "NRT_EXEC_NC_BUSY";
    case kNrtExecOob:
      return "NRT_EXEC_OOB";
    case kNrtCollPending:
      return "NRT_COLL_PENDING";
    default:
      return nullptr;
  }
}
}  // namespace

std::string NrtStatusName(NRT_STATUS s, const NrtApi* api) {
  if (api != nullptr && api->get_status_as_str != nullptr) {
    if (const char* str = api->get_status_as_str(s); str != nullptr && str[0] != '\0') {
      return std::string(str) + " (" + std::to_string(s) + ")";
    }
  }
  const char* known = KnownName(s);
  if (known == nullptr) return "NRT_STATUS " + std::to_string(s);
  return std::string(known) + " (" + std::to_string(s) + ")";
}

}  // namespace pagoda::neuron
