// The filters over sequences (select / reject / selectattr / rejectattr / map / sort /
// dictsort / unique / min / max / sum / groupby), shared by jinja_filters.cc's table.
// Internal to the renderer.
#pragma once

#include "common/status.h"
#include "model/chat/jinja_context.h"
#include "model/chat/jinja_value.h"

namespace pagoda::jinja {

Result<Value> Select(Context& ctx, const Value& v, const Args& args);
Result<Value> Reject(Context& ctx, const Value& v, const Args& args);
Result<Value> SelectAttr(Context& ctx, const Value& v, const Args& args);
Result<Value> RejectAttr(Context& ctx, const Value& v, const Args& args);
Result<Value> Map(Context& ctx, const Value& v, const Args& args);
Result<Value> Sort(Context& ctx, const Value& v, const Args& args);
Result<Value> DictSort(Context& ctx, const Value& v, const Args& args);
Result<Value> Unique(Context& ctx, const Value& v, const Args& args);
Result<Value> Min(Context& ctx, const Value& v, const Args& args);
Result<Value> Max(Context& ctx, const Value& v, const Args& args);
Result<Value> Sum(Context& ctx, const Value& v, const Args& args);
Result<Value> GroupBy(Context& ctx, const Value& v, const Args& args);

}  // namespace pagoda::jinja
