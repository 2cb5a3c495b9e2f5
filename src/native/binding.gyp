{
  "targets": [
    {
      "target_name": "vigil_sha256",
      "sources": ["sha256.c"],
      "cflags": ["-O2", "-Wno-deprecated-declarations"]
    }
  ]
}
