// `pagoda`: the single CLI binary (serve, generate, bench, inspect, tokenize, make-model,
// quantize, health, render-template).
#include <CLI/CLI.hpp>

#include "tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Pagoda: an LLM decoding inference server"};
  app.require_subcommand(1);
  int exit_code = 0;
  pagoda::cli::RegisterGenerate(app, &exit_code);
  pagoda::cli::RegisterTokenize(app, &exit_code);
  pagoda::cli::RegisterInspect(app, &exit_code);
  pagoda::cli::RegisterMakeModel(app, &exit_code);
  pagoda::cli::RegisterServe(app, &exit_code);
  pagoda::cli::RegisterHealth(app, &exit_code);
  pagoda::cli::RegisterBench(app, &exit_code);
  pagoda::cli::RegisterQuantize(app, &exit_code);
  pagoda::cli::RegisterRenderTemplate(app, &exit_code);
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
