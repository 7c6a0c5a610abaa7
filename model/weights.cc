#include "model/weights.h"

namespace pagoda {
namespace {

std::string ShapeOf(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t d = 0; d < ne.size(); ++d) s += (d ? ", " : "") + std::to_string(ne[d]);
  return s + "]";
}

Result<const GgufTensor*> FindShaped(const GgufFile& f, const std::string& name,
                                     const std::vector<int64_t>& ne) {
  const GgufTensor* t = f.FindTensor(name);
  if (!t) return InvalidArgument("tensor '" + name + "' is missing");
  if (t->ne != ne) {
    return InvalidArgument("tensor '" + name + "': shape " + t->ShapeString() + ", expected " +
                           ShapeOf(ne));
  }
  if (!TypeTraits(t->type).can_dequantize) {
    return Unimplemented("tensor '" + name + "': type " + TypeName(t->type) +
                         " is not supported yet");
  }
  return t;
}

// A matrix with `cols` inputs and `rows` outputs (GGUF ne = [cols, rows]).
Result<WeightView> Matrix(const GgufFile& f, const std::string& name, int64_t cols, int64_t rows) {
  PAGODA_ASSIGN_OR_RETURN(const GgufTensor* t, FindShaped(f, name, {cols, rows}));
  return WeightView{t->type, t->data, rows, cols, *RowBytes(t->type, cols)};
}

Result<std::vector<float>> Vector(const GgufFile& f, const std::string& name, int64_t n) {
  PAGODA_ASSIGN_OR_RETURN(const GgufTensor* t, FindShaped(f, name, {n}));
  std::vector<float> v(static_cast<size_t>(n));
  DequantizeRow(t->type, t->data, v.data(), n);
  return v;
}

Result<LayerWeights> BindLayer(const GgufFile& f, const ModelConfig& c, int layer) {
  const std::string p = "blk." + std::to_string(layer) + ".";
  LayerWeights w;
  PAGODA_ASSIGN_OR_RETURN(w.attn_norm, Vector(f, p + "attn_norm.weight", c.n_embd));
  PAGODA_ASSIGN_OR_RETURN(w.wq, Matrix(f, p + "attn_q.weight", c.n_embd, c.q_dim()));
  PAGODA_ASSIGN_OR_RETURN(w.wk, Matrix(f, p + "attn_k.weight", c.n_embd, c.kv_dim()));
  PAGODA_ASSIGN_OR_RETURN(w.wv, Matrix(f, p + "attn_v.weight", c.n_embd, c.kv_dim()));
  PAGODA_ASSIGN_OR_RETURN(w.wo, Matrix(f, p + "attn_output.weight", c.q_dim(), c.n_embd));
  if (c.has_qkv_bias) {
    PAGODA_ASSIGN_OR_RETURN(w.bq, Vector(f, p + "attn_q.bias", c.q_dim()));
    PAGODA_ASSIGN_OR_RETURN(w.bk, Vector(f, p + "attn_k.bias", c.kv_dim()));
    PAGODA_ASSIGN_OR_RETURN(w.bv, Vector(f, p + "attn_v.bias", c.kv_dim()));
  }
  if (c.has_qk_norm) {
    PAGODA_ASSIGN_OR_RETURN(w.q_norm, Vector(f, p + "attn_q_norm.weight", c.head_dim));
    PAGODA_ASSIGN_OR_RETURN(w.k_norm, Vector(f, p + "attn_k_norm.weight", c.head_dim));
  }
  PAGODA_ASSIGN_OR_RETURN(w.ffn_norm, Vector(f, p + "ffn_norm.weight", c.n_embd));
  PAGODA_ASSIGN_OR_RETURN(w.w_gate, Matrix(f, p + "ffn_gate.weight", c.n_embd, c.n_ff));
  PAGODA_ASSIGN_OR_RETURN(w.w_up, Matrix(f, p + "ffn_up.weight", c.n_embd, c.n_ff));
  PAGODA_ASSIGN_OR_RETURN(w.w_down, Matrix(f, p + "ffn_down.weight", c.n_ff, c.n_embd));
  return w;
}

}  // namespace

StepWeights WeightsPerToken(const ModelWeights& weights) {
  StepWeights s;
  auto add = [&s](const WeightView& w) {
    s.bytes += w.rows * w.row_bytes;
    s.params += w.rows * w.cols;
  };
  add(weights.output);
  for (const LayerWeights& l : weights.layers) {
    for (const WeightView* w : l.matrices()) add(*w);
  }
  return s;
}

Result<ModelWeights> BindGgufWeights(const GgufFile& f, const ModelConfig& c) {
  ModelWeights w;
  PAGODA_ASSIGN_OR_RETURN(w.token_embd, Matrix(f, "token_embd.weight", c.n_embd, c.vocab_size));
  PAGODA_ASSIGN_OR_RETURN(w.output_norm, Vector(f, "output_norm.weight", c.n_embd));
  if (c.tied_embeddings) {
    w.output = w.token_embd;
  } else {
    PAGODA_ASSIGN_OR_RETURN(w.output, Matrix(f, "output.weight", c.n_embd, c.vocab_size));
  }
  for (int l = 0; l < c.n_layers; ++l) {
    PAGODA_ASSIGN_OR_RETURN(LayerWeights lw, BindLayer(f, c, l));
    w.layers.push_back(std::move(lw));
  }
  return w;
}

}  // namespace pagoda
