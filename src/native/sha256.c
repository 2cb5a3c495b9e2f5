// Batched SHA-256 for the ledger (verification and appends): one call hashes many messages with OpenSSL's SHA256
// (the copy inside Node, which uses the CPU's SHA extensions), so the per-call overhead of
// node:crypto is paid once per batch instead of twice per ledger record.
#include <node_api.h>
#include <openssl/sha.h>
#include <stdint.h>
#include <string.h>

// sha256Many(data: Buffer, ends: Uint32Array, out: Buffer): message i is data[ends[i-1], ends[i])
// (ends[-1] = 0); its digest is written to out[32 i, 32 i + 32).
static napi_value Sha256Many(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 3) {
    napi_throw_type_error(env, NULL, "sha256Many(data, ends, out)");
    return NULL;
  }
  uint8_t *data, *out;
  size_t data_len, out_len, ends_len;
  napi_typedarray_type type;
  void *ends_raw;
  napi_value ends_buffer;
  size_t ends_offset;
  if (napi_get_buffer_info(env, argv[0], (void **)&data, &data_len) != napi_ok ||
      napi_get_typedarray_info(env, argv[1], &type, &ends_len, &ends_raw, &ends_buffer, &ends_offset) != napi_ok ||
      type != napi_uint32_array || napi_get_buffer_info(env, argv[2], (void **)&out, &out_len) != napi_ok) {
    napi_throw_type_error(env, NULL, "sha256Many(data: Buffer, ends: Uint32Array, out: Buffer)");
    return NULL;
  }
  const uint32_t *ends = (const uint32_t *)ends_raw;
  if (out_len < ends_len * 32) {
    napi_throw_range_error(env, NULL, "out is too small");
    return NULL;
  }
  uint32_t start = 0;
  for (size_t i = 0; i < ends_len; i++) {
    uint32_t end = ends[i];
    if (end < start || end > data_len) {
      napi_throw_range_error(env, NULL, "ends are not increasing within data");
      return NULL;
    }
    // The low-level interface: OpenSSL 3's one-shot SHA256() fetches the algorithm on every call.
    SHA256_CTX ctx;
    SHA256_Init(&ctx);
    SHA256_Update(&ctx, data + start, end - start);
    SHA256_Final(out + 32 * i, &ctx);
    start = end;
  }
  return NULL;
}

// sha256Chain(prev: Buffer, data: Buffer, ends: Uint32Array, out: Buffer): the hashes of new ledger
// rows whose canonical entries are the messages of data (as in sha256Many). For row i,
// out[64 i, +32) = content = SHA-256(message i) and out[64 i + 32, +32) = chain =
// SHA-256(previous chain ‖ content), the previous chain of row 0 being prev (32 bytes).
static napi_value Sha256Chain(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 4) {
    napi_throw_type_error(env, NULL, "sha256Chain(prev, data, ends, out)");
    return NULL;
  }
  uint8_t *prev, *data, *out;
  size_t prev_len, data_len, out_len, ends_len;
  napi_typedarray_type type;
  void *ends_raw;
  napi_value ends_buffer;
  size_t ends_offset;
  if (napi_get_buffer_info(env, argv[0], (void **)&prev, &prev_len) != napi_ok ||
      napi_get_buffer_info(env, argv[1], (void **)&data, &data_len) != napi_ok ||
      napi_get_typedarray_info(env, argv[2], &type, &ends_len, &ends_raw, &ends_buffer, &ends_offset) != napi_ok ||
      type != napi_uint32_array || napi_get_buffer_info(env, argv[3], (void **)&out, &out_len) != napi_ok) {
    napi_throw_type_error(env, NULL, "sha256Chain(prev: Buffer, data: Buffer, ends: Uint32Array, out: Buffer)");
    return NULL;
  }
  const uint32_t *ends = (const uint32_t *)ends_raw;
  if (prev_len != 32) {
    napi_throw_range_error(env, NULL, "prev must be 32 bytes");
    return NULL;
  }
  if (out_len < ends_len * 64) {
    napi_throw_range_error(env, NULL, "out is too small");
    return NULL;
  }
  uint32_t start = 0;
  uint8_t first[32]; // prev may be a view of out: read it before anything is written there
  memcpy(first, prev, 32);
  const uint8_t *chain = first;
  for (size_t i = 0; i < ends_len; i++) {
    uint32_t end = ends[i];
    if (end < start || end > data_len) {
      napi_throw_range_error(env, NULL, "ends are not increasing within data");
      return NULL;
    }
    uint8_t *content = out + 64 * i;
    SHA256_CTX ctx;
    SHA256_Init(&ctx);
    SHA256_Update(&ctx, data + start, end - start);
    SHA256_Final(content, &ctx);
    SHA256_Init(&ctx);
    SHA256_Update(&ctx, chain, 32);
    SHA256_Update(&ctx, content, 32);
    SHA256_Final(content + 32, &ctx);
    chain = content + 32;
    start = end;
  }
  return NULL;
}

static napi_value Init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "sha256Many", NAPI_AUTO_LENGTH, Sha256Many, NULL, &fn);
  napi_set_named_property(env, exports, "sha256Many", fn);
  napi_create_function(env, "sha256Chain", NAPI_AUTO_LENGTH, Sha256Chain, NULL, &fn);
  napi_set_named_property(env, exports, "sha256Chain", fn);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
