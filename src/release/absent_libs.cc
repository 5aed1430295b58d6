// The static release build's stand-ins for three libraries Debian ships no
// static archive of, which libcurl, libpq and libssh reference
// (src/release/meson.build): GSS-API (Kerberos), OpenLDAP and librtmp.
// Every call answers "unavailable"; fleet never asks for Kerberos logins,
// ldap:// or rtmp:// URLs, and each library already handles the failure:
// libpq's GSS encryption finds no credentials and goes on without, libcurl
// and libpq report an LDAP or RTMP URL as unsupported.
#include <gssapi/gssapi.h>
#include <librtmp/rtmp.h>

namespace {

constexpr OM_uint32 kGssUnavailable = GSS_S_UNAVAILABLE;
constexpr int kLdapNotSupported = -12;  // LDAP_NOT_SUPPORTED
constexpr char kGssMessage[] = "GSS-API (Kerberos) is not in this static build of fleet";

OM_uint32 Unavailable(OM_uint32* minor) {
  if (minor) *minor = 0;
  return kGssUnavailable;
}

}  // namespace

extern "C" {

// GSS-API: the functions and OIDs libcurl, libpq and libssh use.
gss_OID GSS_C_NT_HOSTBASED_SERVICE = GSS_C_NO_OID;
gss_OID GSS_C_NT_USER_NAME = GSS_C_NO_OID;

OM_uint32 gss_acquire_cred(OM_uint32* minor, gss_name_t, OM_uint32, gss_OID_set, gss_cred_usage_t,
                           gss_cred_id_t*, gss_OID_set*, OM_uint32*) {
  return Unavailable(minor);
}
OM_uint32 gss_accept_sec_context(OM_uint32* minor, gss_ctx_id_t*, gss_cred_id_t, gss_buffer_t,
                                 gss_channel_bindings_t, gss_name_t*, gss_OID*, gss_buffer_t,
                                 OM_uint32*, OM_uint32*, gss_cred_id_t*) {
  return Unavailable(minor);
}
OM_uint32 gss_init_sec_context(OM_uint32* minor, gss_cred_id_t, gss_ctx_id_t*, gss_name_t, gss_OID,
                               OM_uint32, OM_uint32, gss_channel_bindings_t, gss_buffer_t, gss_OID*,
                               gss_buffer_t output, OM_uint32*, OM_uint32*) {
  if (output) *output = GSS_C_EMPTY_BUFFER;
  return Unavailable(minor);
}
OM_uint32 gss_add_oid_set_member(OM_uint32* minor, gss_OID, gss_OID_set*) {
  return Unavailable(minor);
}
OM_uint32 gss_create_empty_oid_set(OM_uint32* minor, gss_OID_set* set) {
  if (set) *set = GSS_C_NO_OID_SET;
  return Unavailable(minor);
}
OM_uint32 gss_delete_sec_context(OM_uint32* minor, gss_ctx_id_t* ctx, gss_buffer_t) {
  if (ctx) *ctx = GSS_C_NO_CONTEXT;
  if (minor) *minor = 0;
  return GSS_S_COMPLETE;
}
OM_uint32 gss_display_name(OM_uint32* minor, gss_name_t, gss_buffer_t out, gss_OID*) {
  if (out) *out = GSS_C_EMPTY_BUFFER;
  return Unavailable(minor);
}
// Callers print what this returns after any failure: a real message, and a
// buffer gss_release_buffer() below leaves alone.
OM_uint32 gss_display_status(OM_uint32* minor, OM_uint32, int, gss_OID, OM_uint32* context,
                             gss_buffer_t out) {
  if (minor) *minor = 0;
  if (context) *context = 0;
  if (out) {
    out->length = sizeof kGssMessage - 1;
    out->value = const_cast<char*>(kGssMessage);
  }
  return GSS_S_COMPLETE;
}
OM_uint32 gss_get_mic(OM_uint32* minor, gss_ctx_id_t, gss_qop_t, gss_buffer_t, gss_buffer_t out) {
  if (out) *out = GSS_C_EMPTY_BUFFER;
  return Unavailable(minor);
}
OM_uint32 gss_import_name(OM_uint32* minor, gss_buffer_t, gss_OID, gss_name_t* name) {
  if (name) *name = GSS_C_NO_NAME;
  return Unavailable(minor);
}
OM_uint32 gss_indicate_mechs(OM_uint32* minor, gss_OID_set* set) {
  if (set) *set = GSS_C_NO_OID_SET;
  return Unavailable(minor);
}
OM_uint32 gss_inquire_context(OM_uint32* minor, gss_ctx_id_t, gss_name_t*, gss_name_t*, OM_uint32*,
                              gss_OID*, OM_uint32*, int*, int*) {
  return Unavailable(minor);
}
OM_uint32 gss_inquire_cred(OM_uint32* minor, gss_cred_id_t, gss_name_t*, OM_uint32*,
                           gss_cred_usage_t*, gss_OID_set*) {
  return Unavailable(minor);
}
OM_uint32 gss_inquire_cred_by_mech(OM_uint32* minor, gss_cred_id_t, gss_OID, gss_name_t*,
                                   OM_uint32*, OM_uint32*, gss_cred_usage_t*) {
  return Unavailable(minor);
}
OM_uint32 gss_release_buffer(OM_uint32* minor, gss_buffer_t buffer) {
  if (buffer) *buffer = GSS_C_EMPTY_BUFFER;
  if (minor) *minor = 0;
  return GSS_S_COMPLETE;
}
OM_uint32 gss_release_cred(OM_uint32* minor, gss_cred_id_t* cred) {
  if (cred) *cred = GSS_C_NO_CREDENTIAL;
  if (minor) *minor = 0;
  return GSS_S_COMPLETE;
}
OM_uint32 gss_release_name(OM_uint32* minor, gss_name_t* name) {
  if (name) *name = GSS_C_NO_NAME;
  if (minor) *minor = 0;
  return GSS_S_COMPLETE;
}
OM_uint32 gss_release_oid_set(OM_uint32* minor, gss_OID_set* set) {
  if (set) *set = GSS_C_NO_OID_SET;
  if (minor) *minor = 0;
  return GSS_S_COMPLETE;
}
OM_uint32 gss_test_oid_set_member(OM_uint32* minor, gss_OID, gss_OID_set, int* present) {
  if (present) *present = 0;
  return Unavailable(minor);
}
OM_uint32 gss_unwrap(OM_uint32* minor, gss_ctx_id_t, gss_buffer_t, gss_buffer_t out, int*,
                     gss_qop_t*) {
  if (out) *out = GSS_C_EMPTY_BUFFER;
  return Unavailable(minor);
}
OM_uint32 gss_verify_mic(OM_uint32* minor, gss_ctx_id_t, gss_buffer_t, gss_buffer_t, gss_qop_t*) {
  return Unavailable(minor);
}
OM_uint32 gss_wrap(OM_uint32* minor, gss_ctx_id_t, int, gss_qop_t, gss_buffer_t, int*,
                   gss_buffer_t out) {
  if (out) *out = GSS_C_EMPTY_BUFFER;
  return Unavailable(minor);
}
OM_uint32 gss_wrap_size_limit(OM_uint32* minor, gss_ctx_id_t, int, gss_qop_t, OM_uint32,
                              OM_uint32* max) {
  if (max) *max = 0;
  return Unavailable(minor);
}

// OpenLDAP (libcurl's ldap://, libpq's ldap:// service lookups): no
// connection is ever made, so only the first call of each path runs.
struct ldap;
struct ldapmsg;
struct berval;
void* ldap_init(const char*, int) { return nullptr; }
int ldap_init_fd(int, int, const char*, ldap** out) {
  if (out) *out = nullptr;
  return kLdapNotSupported;
}
char* ldap_err2string(int) {
  static char message[] = "LDAP is not in this static build of fleet";
  return message;
}
int ldap_url_parse(const char*, void** out) {
  if (out) *out = nullptr;
  return 3;  // LDAP_URL_ERR_BADSCHEME
}
int ldap_pvt_url_scheme2proto(const char*) { return -1; }
int ldap_set_option(ldap*, int, const void*) { return kLdapNotSupported; }
int ldap_get_option(ldap*, int, void*) { return kLdapNotSupported; }
int ldap_simple_bind(ldap*, const char*, const char*) { return -1; }
int ldap_sasl_bind(ldap*) { return kLdapNotSupported; }
int ldap_start_tls(ldap*) { return kLdapNotSupported; }
int ldap_unbind(ldap*) { return kLdapNotSupported; }
int ldap_unbind_ext(ldap*) { return kLdapNotSupported; }
int ldap_search_ext(ldap*) { return kLdapNotSupported; }
int ldap_search_st(ldap*) { return kLdapNotSupported; }
int ldap_result(ldap*) { return -1; }
int ldap_abandon_ext(ldap*) { return kLdapNotSupported; }
int ldap_parse_result(ldap*) { return kLdapNotSupported; }
int ldap_parse_sasl_bind_result(ldap*) { return kLdapNotSupported; }
int ldap_msgfree(ldapmsg*) { return 0; }
int ldap_msgtype(ldapmsg*) { return -1; }
int ldap_count_entries(ldap*, ldapmsg*) { return -1; }
ldapmsg* ldap_first_entry(ldap*, ldapmsg*) { return nullptr; }
berval** ldap_get_values_len(ldap*, ldapmsg*, const char*) { return nullptr; }
void ldap_value_free_len(berval**) {}
int ldap_get_attribute_ber(ldap*) { return kLdapNotSupported; }
int ldap_get_dn_ber(ldap*) { return kLdapNotSupported; }
void ldap_memfree(void*) {}
void ldap_free_urldesc(void*) {}
void ber_free(void*, int) {}
void ber_bvfree(berval*) {}
void ber_memfree(void*) {}
int ber_sockbuf_add_io(void*, void*, int, void*) { return -1; }

}  // extern "C"

// librtmp (libcurl's rtmp:// URLs): RTMP_Alloc fails, which libcurl reports.
RTMP* RTMP_Alloc() { return nullptr; }
void RTMP_Free(RTMP*) {}
void RTMP_Init(RTMP*) {}
void RTMP_Close(RTMP*) {}
int RTMP_SetupURL(RTMP*, char*) { return 0; }
int RTMP_Connect1(RTMP*, RTMPPacket*) { return 0; }
int RTMP_ConnectStream(RTMP*, int) { return 0; }
int RTMP_Read(RTMP*, char*, int) { return -1; }
int RTMP_Write(RTMP*, const char*, int) { return -1; }
void RTMP_SetBufferMS(RTMP*, int) {}
