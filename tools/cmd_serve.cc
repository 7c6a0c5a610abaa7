// `pagoda serve`: the gRPC server (see server/server.h).
#include <cstdio>
#include <iostream>

#include "server/config.h"
#include "server/server.h"
#include "tools/commands.h"
#include "tools/kernels_flag.h"
#include "tools/speculative_flag.h"

namespace pagoda::cli {
namespace {

struct ServeArgs {
  std::string config_file;
  std::vector<std::string> overrides;
  std::string model;
  bool print_config = false;
  KernelFlags kernel_flags;
  SpeculativeFlags speculative_flags;
};

int RunServe(const ServeArgs& args) {
  auto config = args.config_file.empty() ? Result<PagodaConfig>(PagodaConfig())
                                         : LoadConfigFile(args.config_file);
  if (!config.ok()) {
    std::fprintf(stderr, "error: %s\n", config.status().message().c_str());
    return kExitBadConfig;
  }
  if (!args.model.empty()) config->model.path = args.model;
  for (const std::string& o : args.overrides) {
    Status st = ApplyOverride(*config, o);
    if (!st.ok()) {
      std::fprintf(stderr, "error: %s\n", st.message().c_str());  // names the --set itself
      return kExitBadConfig;
    }
  }
  if (Status st =
          ApplySpeculativeFlags(args.speculative_flags, &config->runtime.engine.speculative);
      !st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.message().c_str());
    return kExitBadConfig;
  }
  Status st = ValidateConfig(*config);
  if (!st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.message().c_str());
    return kExitBadConfig;
  }
  if (args.print_config) {
    std::cout << DumpConfig(RedactSecrets(*config));
    return kExitOk;
  }
  // The kernel caps are command-line / environment choices, not YAML keys.
  if (Status st = ApplyKernelFlags(args.kernel_flags, &config->runtime.cpu); !st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.message().c_str());
    return kExitBadConfig;
  }
  return RunServer(*config);
}

}  // namespace

void RegisterServe(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve the gRPC API");
  cmd->add_option("--config,-c", args->config_file, "YAML config file (default: built-in)");
  cmd->add_option("--set", args->overrides, "Override a config key: key.path=value (repeatable)");
  cmd->add_option("--model,-m", args->model,
                  "GGUF model file or Hugging Face directory (same as --set model.path=...)");
  cmd->add_flag("--print-config", args->print_config, "Print the effective config and exit");
  AddKernelFlags(cmd, &args->kernel_flags);
  AddSpeculativeFlags(cmd, &args->speculative_flags);
  cmd->callback([args, exit_code] { *exit_code = RunServe(*args); });
}

}  // namespace pagoda::cli
