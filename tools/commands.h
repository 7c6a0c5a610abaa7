// The `pagoda` CLI subcommands. Each Register* adds one subcommand to the app and sets the
// callback that runs it; a callback that fails sets `*exit_code` non-zero and prints the error.
#pragma once

#include <CLI/CLI.hpp>

namespace pagoda::cli {

void RegisterGenerate(CLI::App& app, int* exit_code);
void RegisterTokenize(CLI::App& app, int* exit_code);
void RegisterInspect(CLI::App& app, int* exit_code);
void RegisterMakeModel(CLI::App& app, int* exit_code);
void RegisterServe(CLI::App& app, int* exit_code);
void RegisterHealth(CLI::App& app, int* exit_code);
void RegisterBench(CLI::App& app, int* exit_code);
void RegisterQuantize(CLI::App& app, int* exit_code);
void RegisterRenderTemplate(CLI::App& app, int* exit_code);

}  // namespace pagoda::cli
