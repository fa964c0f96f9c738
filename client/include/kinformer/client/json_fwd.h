#pragma once
// JsonValue: RapidJSON's default value type, declared without including RapidJSON, so that
// kinformer's public headers do not require it; only code that builds or reads JSON values (a
// custom Codec) includes <rapidjson/document.h> itself. client/src/json.cc checks that this is
// the same type as rapidjson::Value.

namespace rapidjson {
class CrtAllocator;
template <typename BaseAllocator>
class MemoryPoolAllocator;
template <typename CharType>
struct UTF8;
template <typename Encoding, typename Allocator>
class GenericValue;
}  // namespace rapidjson

namespace kinformer::client {

using JsonValue = rapidjson::GenericValue<rapidjson::UTF8<char>,
                                          rapidjson::MemoryPoolAllocator<rapidjson::CrtAllocator>>;

}  // namespace kinformer::client
