// Batched SHA-256 for the ledger (verification and appends): one call hashes many messages with
// OpenSSL's SHA256 (the copy inside Node, which uses the CPU's SHA extensions), so the per-call
// overhead of node:crypto is paid once per batch instead of twice per ledger record.
#include <node_api.h>
#include <openssl/sha.h>
#include <stdint.h>
#include <string.h>

// The arguments of a call: exactly `argc` of them, else a TypeError naming `usage`.
static int get_args(napi_env env, napi_callback_info info, size_t argc, napi_value *argv, const char *usage) {
  size_t given = argc;
  if (napi_get_cb_info(env, info, &given, argv, NULL, NULL) != napi_ok || given != argc) {
    napi_throw_type_error(env, NULL, usage);
    return 0;
  }
  return 1;
}

// Messages: data[ends[i-1], ends[i]) (ends[-1] = 0), checked to lie within data in order.
typedef struct {
  const uint8_t *data;
  const uint32_t *ends;
  size_t count;
} messages;

static int get_buffer(napi_env env, napi_value value, uint8_t **bytes, size_t *len) {
  return napi_get_buffer_info(env, value, (void **)bytes, len) == napi_ok;
}

static int get_messages(napi_env env, napi_value data_value, napi_value ends_value, messages *m) {
  uint8_t *data;
  size_t data_len;
  napi_typedarray_type type;
  void *ends_raw;
  napi_value ends_buffer;
  size_t ends_offset;
  if (!get_buffer(env, data_value, &data, &data_len) ||
      napi_get_typedarray_info(env, ends_value, &type, &m->count, &ends_raw, &ends_buffer, &ends_offset) != napi_ok ||
      type != napi_uint32_array) {
    return 0;
  }
  m->data = data;
  m->ends = (const uint32_t *)ends_raw;
  uint32_t start = 0;
  for (size_t i = 0; i < m->count; i++) {
    if (m->ends[i] < start || m->ends[i] > data_len) {
      napi_throw_range_error(env, NULL, "ends are not increasing within data");
      return -1;
    }
    start = m->ends[i];
  }
  return 1;
}

// SHA-256 of message i into digest. The low-level interface: OpenSSL 3's one-shot SHA256()
// fetches the algorithm on every call.
static void hash_message(const messages *m, size_t i, uint8_t *digest) {
  uint32_t start = i == 0 ? 0 : m->ends[i - 1];
  SHA256_CTX ctx;
  SHA256_Init(&ctx);
  SHA256_Update(&ctx, m->data + start, m->ends[i] - start);
  SHA256_Final(digest, &ctx);
}

static int check_out(napi_env env, size_t out_len, size_t need) {
  if (out_len >= need) return 1;
  napi_throw_range_error(env, NULL, "out is too small");
  return 0;
}

// sha256Many(data: Buffer, ends: Uint32Array, out: Buffer): the digest of message i is written to
// out[32 i, 32 i + 32).
static napi_value Sha256Many(napi_env env, napi_callback_info info) {
  static const char usage[] = "sha256Many(data: Buffer, ends: Uint32Array, out: Buffer)";
  napi_value argv[3];
  if (!get_args(env, info, 3, argv, usage)) return NULL;
  messages m;
  uint8_t *out;
  size_t out_len;
  if (!get_buffer(env, argv[2], &out, &out_len)) {
    napi_throw_type_error(env, NULL, usage);
    return NULL;
  }
  int got = get_messages(env, argv[0], argv[1], &m);
  if (got == 0) napi_throw_type_error(env, NULL, usage);
  if (got != 1 || !check_out(env, out_len, m.count * 32)) return NULL;
  for (size_t i = 0; i < m.count; i++) hash_message(&m, i, out + 32 * i);
  return NULL;
}

// sha256Rows(prev: Buffer, data: Buffer, ends: Uint32Array, out: Buffer): the hashes of new ledger
// rows whose canonical entries are the messages of data. For row i, out[96 i, +32) = content =
// SHA-256(message i), out[96 i + 32, +32) = chain = SHA-256(previous chain ‖ content), the previous
// chain of row 0 being prev (32 bytes), and out[96 i + 64, +32) = the row's Merkle leaf hash,
// SHA-256(0x00 ‖ message i) (RFC 9162 §2.1.1).
static napi_value Sha256Rows(napi_env env, napi_callback_info info) {
  static const char usage[] = "sha256Rows(prev: Buffer, data: Buffer, ends: Uint32Array, out: Buffer)";
  napi_value argv[4];
  if (!get_args(env, info, 4, argv, usage)) return NULL;
  messages m;
  uint8_t *prev, *out;
  size_t prev_len, out_len;
  if (!get_buffer(env, argv[0], &prev, &prev_len) || !get_buffer(env, argv[3], &out, &out_len)) {
    napi_throw_type_error(env, NULL, usage);
    return NULL;
  }
  if (prev_len != 32) {
    napi_throw_range_error(env, NULL, "prev must be 32 bytes");
    return NULL;
  }
  int got = get_messages(env, argv[1], argv[2], &m);
  if (got == 0) napi_throw_type_error(env, NULL, usage);
  if (got != 1 || !check_out(env, out_len, m.count * 96)) return NULL;
  uint8_t first[32]; // prev may be a view of out: read it before anything is written there
  memcpy(first, prev, 32);
  const uint8_t *chain = first;
  static const uint8_t leaf_prefix = 0x00;
  for (size_t i = 0; i < m.count; i++) {
    uint8_t *content = out + 96 * i;
    hash_message(&m, i, content);
    SHA256_CTX ctx;
    SHA256_Init(&ctx);
    SHA256_Update(&ctx, chain, 32);
    SHA256_Update(&ctx, content, 32);
    SHA256_Final(content + 32, &ctx);
    uint32_t start = i == 0 ? 0 : m.ends[i - 1];
    SHA256_Init(&ctx);
    SHA256_Update(&ctx, &leaf_prefix, 1);
    SHA256_Update(&ctx, m.data + start, m.ends[i] - start);
    SHA256_Final(content + 64, &ctx);
    chain = content + 32;
  }
  return NULL;
}

// sha256Nodes(pairs: Buffer, out: Buffer): Merkle interior nodes (RFC 9162 §2.1.1). pairs holds
// n left ‖ right pairs of 32-byte hashes (64 n bytes); out[32 i, +32) = SHA-256(0x01 ‖ pair i).
static napi_value Sha256Nodes(napi_env env, napi_callback_info info) {
  static const char usage[] = "sha256Nodes(pairs: Buffer, out: Buffer)";
  napi_value argv[2];
  if (!get_args(env, info, 2, argv, usage)) return NULL;
  uint8_t *pairs, *out;
  size_t pairs_len, out_len;
  if (!get_buffer(env, argv[0], &pairs, &pairs_len) || !get_buffer(env, argv[1], &out, &out_len)) {
    napi_throw_type_error(env, NULL, usage);
    return NULL;
  }
  if (pairs_len % 64 != 0) {
    napi_throw_range_error(env, NULL, "pairs must be a whole number of 64-byte pairs");
    return NULL;
  }
  size_t count = pairs_len / 64;
  if (!check_out(env, out_len, count * 32)) return NULL;
  static const uint8_t node_prefix = 0x01;
  for (size_t i = 0; i < count; i++) {
    SHA256_CTX ctx;
    SHA256_Init(&ctx);
    SHA256_Update(&ctx, &node_prefix, 1);
    SHA256_Update(&ctx, pairs + 64 * i, 64);
    SHA256_Final(out + 32 * i, &ctx);
  }
  return NULL;
}

static napi_value Init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "sha256Many", NAPI_AUTO_LENGTH, Sha256Many, NULL, &fn);
  napi_set_named_property(env, exports, "sha256Many", fn);
  napi_create_function(env, "sha256Rows", NAPI_AUTO_LENGTH, Sha256Rows, NULL, &fn);
  napi_set_named_property(env, exports, "sha256Rows", fn);
  napi_create_function(env, "sha256Nodes", NAPI_AUTO_LENGTH, Sha256Nodes, NULL, &fn);
  napi_set_named_property(env, exports, "sha256Nodes", fn);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
