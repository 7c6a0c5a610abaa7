#include "model/tokenizer/spm_tokenizer.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <queue>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "model/tokenizer/special_tokens.h"
#include "model/tokenizer/utf8.h"

namespace pagoda {
namespace {

constexpr std::string_view kMetaSpace = "\xE2\x96\x81";  // "▁" U+2581

// Parses "<0xHH>" (either hex case); returns -1 if `piece` is not a byte piece.
int ParseBytePiece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  int value = 0;
  for (char c : piece.substr(3, 2)) {
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

std::string ReplaceAll(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (true) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(s.substr(pos));
  return out;
}

Status CheckId(int32_t id, bool allow_none, size_t n, const char* field) {
  if ((allow_none && id == -1) || (id >= 0 && static_cast<size_t>(id) < n)) return Status::Ok();
  return InvalidArgument(std::string("SpmVocab.") + field + " = " + std::to_string(id) +
                         " is outside [0, " + std::to_string(n) + ")" +
                         (allow_none ? " and is not -1" : ""));
}

// Per-token validation: kind in range, score not NaN, byte pieces spelled <0xHH>.
Status CheckToken(const SpmVocab& vocab, size_t i) {
  std::string where = "[";
  where += std::to_string(i);
  where += "]";
  const int kind = static_cast<int>(vocab.kinds[i]);
  if (kind < static_cast<int>(TokenKind::kNormal) || kind > static_cast<int>(TokenKind::kByte)) {
    return InvalidArgument("SpmVocab.kinds" + where + " = " + std::to_string(kind) +
                           " is not a valid TokenKind (1..6)");
  }
  if (std::isnan(vocab.scores[i])) {
    return InvalidArgument("SpmVocab.scores" + where + " is NaN");
  }
  if (vocab.kinds[i] == TokenKind::kByte && ParseBytePiece(vocab.pieces[i]) < 0) {
    return InvalidArgument("SpmVocab.pieces" + where + " = '" + vocab.pieces[i] +
                           "' has kind byte but is not of the form <0xHH>");
  }
  return Status::Ok();
}

// BPE runs on chunks of at most this many normalized bytes so that 32-bit indices suffice.
constexpr size_t kMaxChunkBytes = size_t{1} << 30;

// A symbol of the BPE working list: a byte range of the normalized text (20 bytes).
struct Symbol {
  int32_t prev;  // -1: none
  int32_t next;  // -1: none
  uint32_t start;
  uint32_t len;
  bool frozen;  // user-defined piece: never merged
};

// A candidate merge of two adjacent symbols (SentencePiece's SymbolPair).
struct MergeCandidate {
  float score;
  int32_t left;
  int32_t right;
  uint32_t len;  // length of the merged piece; detects stale candidates
};

// Highest score first; ties go to the leftmost pair (same order as SentencePiece).
struct CandidateOrder {
  bool operator()(const MergeCandidate& a, const MergeCandidate& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

using Agenda = std::priority_queue<MergeCandidate, std::vector<MergeCandidate>, CandidateOrder>;
// Merged unused piece -> the two pieces it was formed from (for resegmentation).
using RevMerge =
    std::unordered_map<std::string_view, std::pair<std::string_view, std::string_view>>;

class SpmTokenizer final : public Tokenizer {
 public:
  explicit SpmTokenizer(SpmVocab vocab);

  std::vector<int32_t> Encode(std::string_view text, bool add_bos) const override;
  std::vector<int32_t> EncodeWithSpecials(std::string_view text,
                                          std::span<const TextSpan> special_spans,
                                          bool add_bos) const override;
  std::string TokenBytes(int32_t id) const override;
  std::string Decode(std::span<const int32_t> ids) const override;
  std::string_view Piece(int32_t id) const override;
  TokenKind Kind(int32_t id) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(vocab_.pieces.size()); }
  int32_t bos_id() const override { return vocab_.bos_id; }
  int32_t eos_id() const override { return vocab_.eos_id; }
  bool add_bos_by_default() const override { return vocab_.add_bos; }
  std::string_view type_name() const override { return "spm"; }
  int32_t unk_id() const override { return vocab_.unk_id; }

 private:
  bool InRange(int32_t id) const { return id >= 0 && id < vocab_size(); }
  // Id of a piece BPE may produce (normal, user-defined, unused), or -1.
  int32_t Lookup(std::string_view piece) const;
  std::string Normalize(std::string_view text) const;
  size_t MatchUserDefined(std::string_view rest) const;
  std::vector<Symbol> Split(std::string_view normalized) const;
  void MaybeAddCandidate(std::string_view text, const std::vector<Symbol>& symbols, int32_t left,
                         int32_t right, Agenda* agenda, RevMerge* rev_merge) const;
  void EncodeChunk(std::string_view normalized, std::vector<int32_t>* ids) const;
  void EncodeText(std::string_view text, std::vector<int32_t>* ids) const;
  void Merge(std::string_view text, std::vector<Symbol>* symbols, RevMerge* rev_merge) const;
  void EmitPiece(std::string_view piece, const RevMerge& rev_merge, bool* prev_unk,
                 std::vector<int32_t>* ids) const;
  void EmitUnknown(std::string_view piece, bool* prev_unk, std::vector<int32_t>* ids) const;

  SpmVocab vocab_;
  std::unordered_map<std::string_view, int32_t> piece_to_id_;
  std::unordered_set<std::string_view> user_defined_;
  std::vector<size_t> user_defined_lengths_;  // distinct, longest first
  SpecialTokenMatcher control_;               // control tokens, matched in special spans only
  std::array<int32_t, 256> byte_to_id_;       // -1: no byte piece
  std::vector<std::string> token_bytes_;      // TokenBytes(id), precomputed
  std::vector<bool> starts_with_meta_;        // piece starts with "▁" (strippable at BOS)
  bool has_unused_ = false;
};

SpmTokenizer::SpmTokenizer(SpmVocab vocab) : vocab_(std::move(vocab)) {
  byte_to_id_.fill(-1);
  const size_t n = vocab_.pieces.size();
  token_bytes_.resize(n);
  piece_to_id_.reserve(n);
  starts_with_meta_.resize(n, false);
  for (size_t i = 0; i < n; ++i) {
    const std::string_view piece = vocab_.pieces[i];
    const auto id = static_cast<int32_t>(i);
    switch (vocab_.kinds[i]) {
      case TokenKind::kUserDefined:
        if (!piece.empty() && user_defined_.insert(piece).second) {
          user_defined_lengths_.push_back(piece.size());
        }
        [[fallthrough]];
      case TokenKind::kNormal:
      case TokenKind::kUnused:
        has_unused_ |= vocab_.kinds[i] == TokenKind::kUnused;
        if (!piece.empty()) piece_to_id_.emplace(piece, id);
        token_bytes_[i] = ReplaceAll(piece, kMetaSpace, " ");
        starts_with_meta_[i] = piece.starts_with(kMetaSpace);
        break;
      case TokenKind::kByte: {
        const int byte = ParseBytePiece(piece);
        if (byte_to_id_[byte] < 0) byte_to_id_[byte] = id;
        token_bytes_[i] = std::string(1, static_cast<char>(byte));
        break;
      }
      case TokenKind::kUnknown:
        token_bytes_[i] = vocab_.unk_surface;
        break;
      case TokenKind::kControl:
        control_.Add(piece, id, /*anywhere=*/false);
        break;
    }
  }
  std::sort(user_defined_lengths_.begin(), user_defined_lengths_.end(), std::greater<>());
  user_defined_lengths_.erase(
      std::unique(user_defined_lengths_.begin(), user_defined_lengths_.end()),
      user_defined_lengths_.end());
}

int32_t SpmTokenizer::Lookup(std::string_view piece) const {
  const auto it = piece_to_id_.find(piece);
  return it == piece_to_id_.end() ? -1 : it->second;
}

std::string_view SpmTokenizer::Piece(int32_t id) const {
  return InRange(id) ? std::string_view(vocab_.pieces[id]) : std::string_view();
}

TokenKind SpmTokenizer::Kind(int32_t id) const {
  return InRange(id) ? vocab_.kinds[id] : TokenKind::kUnused;
}

std::string SpmTokenizer::TokenBytes(int32_t id) const {
  return InRange(id) ? token_bytes_[id] : std::string();
}

// SentencePiece's Normalizer without a charsmap: invalid bytes -> U+FFFD, dummy prefix,
// spaces -> "▁", optional removal of leading/trailing/repeated spaces.
std::string SpmTokenizer::Normalize(std::string_view text) const {
  std::string out;
  const bool remove_extra = vocab_.remove_extra_whitespaces;
  if (remove_extra) text.remove_prefix(std::min(text.find_first_not_of(' '), text.size()));
  if (text.empty()) return out;
  const std::string_view space = vocab_.escape_whitespaces ? kMetaSpace : " ";
  out.reserve(text.size() + text.size() / 2 + space.size());
  if (vocab_.add_dummy_prefix) out.append(space);
  bool prev_space = remove_extra;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t len = 0;
    if (utf8::ExamineChar(text.substr(pos), &len) != utf8::CharStatus::kValid) {
      out.append(utf8::kReplacementChar);
      prev_space = false;
    } else if (text[pos] == ' ') {
      if (!(remove_extra && prev_space)) out.append(space);
      prev_space = true;
    } else {
      out.append(text.substr(pos, len));
      prev_space = false;
    }
    pos += len;
  }
  if (remove_extra) {
    std::string_view kept = out;
    while (kept.ends_with(space)) kept.remove_suffix(space.size());
    out.resize(kept.size());
  }
  return out;
}

size_t SpmTokenizer::MatchUserDefined(std::string_view rest) const {
  for (size_t len : user_defined_lengths_) {
    if (len <= rest.size() && user_defined_.contains(rest.substr(0, len))) return len;
  }
  return 0;
}

// Splits normalized text into characters, user-defined pieces first (longest match).
std::vector<Symbol> SpmTokenizer::Split(std::string_view normalized) const {
  std::vector<Symbol> symbols;
  symbols.reserve(normalized.size());
  size_t pos = 0;
  while (pos < normalized.size()) {
    size_t len = MatchUserDefined(normalized.substr(pos));
    const bool frozen = len > 0;
    if (!frozen) utf8::ExamineChar(normalized.substr(pos), &len);  // text is valid UTF-8
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back(
        {index - 1, -1, static_cast<uint32_t>(pos), static_cast<uint32_t>(len), frozen});
    pos += len;
    if (pos < normalized.size()) symbols.back().next = index + 1;
  }
  return symbols;
}

void SpmTokenizer::MaybeAddCandidate(std::string_view text, const std::vector<Symbol>& symbols,
                                     int32_t left, int32_t right, Agenda* agenda,
                                     RevMerge* rev_merge) const {
  if (left < 0 || right < 0 || symbols[left].frozen || symbols[right].frozen) return;
  const Symbol& l = symbols[left];
  const Symbol& r = symbols[right];
  const std::string_view merged = text.substr(l.start, l.len + r.len);
  const int32_t id = Lookup(merged);
  if (id < 0) return;
  agenda->push({vocab_.scores[id], left, right, static_cast<uint32_t>(merged.size())});
  if (vocab_.kinds[id] == TokenKind::kUnused) {
    (*rev_merge)[merged] = {text.substr(l.start, l.len), text.substr(r.start, r.len)};
  }
}

// Repeatedly merges the best adjacent pair whose concatenation is a vocabulary piece.
void SpmTokenizer::Merge(std::string_view text, std::vector<Symbol>* symbols,
                         RevMerge* rev_merge) const {
  std::vector<Symbol>& s = *symbols;
  Agenda agenda;
  for (size_t i = 1; i < s.size(); ++i) {
    MaybeAddCandidate(text, s, static_cast<int32_t>(i) - 1, static_cast<int32_t>(i), &agenda,
                      rev_merge);
  }
  while (!agenda.empty()) {
    const MergeCandidate top = agenda.top();
    agenda.pop();
    Symbol& left = s[top.left];
    Symbol& right = s[top.right];
    if (left.len == 0 || right.len == 0 || left.len + right.len != top.len) continue;  // stale
    left.len += right.len;
    left.next = right.next;
    if (right.next >= 0) s[right.next].prev = top.left;
    right.len = 0;
    MaybeAddCandidate(text, s, left.prev, top.left, &agenda, rev_merge);
    MaybeAddCandidate(text, s, top.left, left.next, &agenda, rev_merge);
  }
}

void SpmTokenizer::EmitUnknown(std::string_view piece, bool* prev_unk,
                               std::vector<int32_t>* ids) const {
  if (vocab_.byte_fallback) {
    for (char c : piece) {
      const int32_t id = byte_to_id_[static_cast<uint8_t>(c)];
      if (id >= 0 || vocab_.unk_id >= 0) ids->push_back(id >= 0 ? id : vocab_.unk_id);
    }
  } else if (!*prev_unk && vocab_.unk_id >= 0) {
    ids->push_back(vocab_.unk_id);  // a run of unknown pieces becomes one unk
  }
  *prev_unk = true;
}

// Emits a final symbol, splitting merged unused pieces back into their parts.
void SpmTokenizer::EmitPiece(std::string_view piece, const RevMerge& rev_merge, bool* prev_unk,
                             std::vector<int32_t>* ids) const {
  std::vector<std::string_view> stack = {piece};
  while (!stack.empty()) {
    const std::string_view w = stack.back();
    stack.pop_back();
    const int32_t id = Lookup(w);
    if (id < 0) {
      EmitUnknown(w, prev_unk, ids);
      continue;
    }
    const auto it = vocab_.kinds[id] == TokenKind::kUnused ? rev_merge.find(w) : rev_merge.end();
    if (it == rev_merge.end()) {
      ids->push_back(id);
      *prev_unk = false;
      continue;
    }
    stack.push_back(it->second.second);
    stack.push_back(it->second.first);
  }
}

void SpmTokenizer::EncodeChunk(std::string_view normalized, std::vector<int32_t>* ids) const {
  std::vector<Symbol> symbols = Split(normalized);
  RevMerge rev_merge;
  Merge(normalized, &symbols, &rev_merge);
  bool prev_unk = false;
  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    const Symbol& s = symbols[i];
    EmitPiece(normalized.substr(s.start, s.len), rev_merge, &prev_unk, ids);
  }
}

// Where to end a chunk of a huge text: before the last "▁" (a word start) in the final MiB of
// the limit, else at a character boundary. Only texts over 1 GiB are ever split.
size_t ChunkEnd(std::string_view text) {
  if (text.size() <= kMaxChunkBytes) return text.size();
  const size_t meta = text.rfind(kMetaSpace, kMaxChunkBytes);
  if (meta != std::string_view::npos && meta + (size_t{1} << 20) > kMaxChunkBytes && meta > 0) {
    return meta;
  }
  size_t end = kMaxChunkBytes;
  while (end > 0 && (static_cast<uint8_t>(text[end]) & 0xC0) == 0x80) --end;
  return end;
}

// Normalizes and encodes one text (huge texts chunk-wise).
void SpmTokenizer::EncodeText(std::string_view text, std::vector<int32_t>* ids) const {
  const std::string normalized = Normalize(text);
  std::string_view rest = normalized;
  while (!rest.empty()) {
    const size_t end = ChunkEnd(rest);
    EncodeChunk(rest.substr(0, end), ids);
    rest.remove_prefix(end);
  }
}

std::vector<int32_t> SpmTokenizer::Encode(std::string_view text, bool add_bos) const {
  std::vector<int32_t> ids;
  if (add_bos && vocab_.bos_id >= 0) ids.push_back(vocab_.bos_id);
  EncodeText(text, &ids);
  return ids;
}

std::vector<int32_t> SpmTokenizer::EncodeWithSpecials(std::string_view text,
                                                      std::span<const TextSpan> special_spans,
                                                      bool add_bos) const {
  std::vector<int32_t> ids;
  if (add_bos && vocab_.bos_id >= 0) ids.push_back(vocab_.bos_id);
  SplitOnSpecials(
      text, special_spans, control_, [&](std::string_view fragment) { EncodeText(fragment, &ids); },
      [&](int32_t id) { ids.push_back(id); });
  return ids;
}

// Follows SentencePiece's Decode: control tokens vanish, unk shows unk_surface, and the "▁"
// of the first piece is dropped while nothing has been output yet (only the first such "▁"
// unless remove_extra_whitespaces, which drops all leading ones).
std::string SpmTokenizer::Decode(std::span<const int32_t> ids) const {
  std::string raw;
  const bool strip = vocab_.add_dummy_prefix || vocab_.remove_extra_whitespaces;
  bool is_bos_ws = true;
  bool bos_ws_seen = false;
  for (const int32_t id : ids) {
    if (!InRange(id)) continue;
    const TokenKind kind = vocab_.kinds[id];
    if (kind == TokenKind::kByte) {
      raw.append(token_bytes_[id]);
      continue;
    }
    if (bos_ws_seen || !raw.empty()) is_bos_ws = false;
    bos_ws_seen = false;
    std::string_view surface = token_bytes_[id];
    if (is_bos_ws && strip && starts_with_meta_[id]) {
      surface.remove_prefix(1);  // the " " that "▁" became
      bos_ws_seen = !vocab_.remove_extra_whitespaces;
    }
    raw.append(surface);
  }
  return utf8::MakeValid(raw);
}

}  // namespace

Status ValidateSpmVocab(const SpmVocab& vocab) {
  const size_t n = vocab.pieces.size();
  if (n == 0) return InvalidArgument("SpmVocab.pieces is empty");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return InvalidArgument("SpmVocab.pieces has " + std::to_string(n) + " entries, over int32");
  }
  if (vocab.scores.size() != n) {
    return InvalidArgument("SpmVocab.scores has " + std::to_string(vocab.scores.size()) +
                           " entries but pieces has " + std::to_string(n));
  }
  if (vocab.kinds.size() != n) {
    return InvalidArgument("SpmVocab.kinds has " + std::to_string(vocab.kinds.size()) +
                           " entries but pieces has " + std::to_string(n));
  }
  PAGODA_RETURN_IF_ERROR(CheckId(vocab.unk_id, /*allow_none=*/true, n, "unk_id"));
  PAGODA_RETURN_IF_ERROR(CheckId(vocab.bos_id, /*allow_none=*/true, n, "bos_id"));
  PAGODA_RETURN_IF_ERROR(CheckId(vocab.eos_id, /*allow_none=*/true, n, "eos_id"));
  for (size_t i = 0; i < n; ++i) PAGODA_RETURN_IF_ERROR(CheckToken(vocab, i));
  return Status::Ok();
}

Result<std::unique_ptr<Tokenizer>> MakeSpmTokenizer(SpmVocab vocab) {
  PAGODA_RETURN_IF_ERROR(ValidateSpmVocab(vocab));
  return std::unique_ptr<Tokenizer>(std::make_unique<SpmTokenizer>(std::move(vocab)));
}

}  // namespace pagoda
