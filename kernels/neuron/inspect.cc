// `pagoda inspect --neuron-manifest PATH` (neuron_backend.h).
#include <ostream>
#include <string>

#include "kernels/neuron/bucketing.h"
#include "kernels/neuron/neuron_backend.h"

namespace pagoda {

Status InspectNeuronManifest(const std::string& path, std::ostream& out) {
  PAGODA_ASSIGN_OR_RETURN(neuron::NeuronManifest m, neuron::LoadManifest(path));
  PAGODA_RETURN_IF_ERROR(neuron::CheckHasBothPhases(m));
  out << path << ": " << neuron::kManifestFormat << ", target " << m.target << ", lnc " << m.lnc
      << (m.compiler.empty() ? "" : ", " + m.compiler) << "\n";
  out << "model: " << m.arch << ", " << m.n_layers << " layers, vocab " << m.vocab << ", "
      << m.n_kv_heads << " kv heads x " << m.head_dim << "\n";
  out << "kv cache: " << m.num_blocks << " blocks x " << m.block_size << " tokens, " << m.kv_dtype
      << ", slot_pad " << m.slot_pad << ", table_pad " << m.table_pad << "\n";
  out << "weights: " << m.weights_mode << " (" << m.weights.size() << " tensors)\n";
  out << "max context: " << neuron::MaxContextBlocks(m.programs) * m.block_size << " tokens\n";
  const int32_t tps = neuron::MaxTokensPerSeq(m.programs, 0);
  out << "speculative verification: "
      << (tps > 1 ? "up to " + std::to_string(tps - 1) + " draft tokens per execution"
                  : std::string("no (every decode program has tokens_per_seq 1)"))
      << "\n";
  out << "buckets:\n";
  for (const neuron::ManifestProgram& p : m.programs) {
    out << "  " << p.id << ": " << p.phase;
    if (p.is_decode()) {
      out << " max_seqs " << p.max_seqs << " tokens_per_seq " << p.tokens_per_seq;
    } else {
      out << " max_tokens " << p.max_tokens;
    }
    out << " max_ctx_blocks " << p.max_ctx_blocks << " (" << p.max_ctx_blocks * m.block_size
        << " tokens)  neff " << p.neff << "\n";
  }
  return Status::Ok();
}

}  // namespace pagoda
