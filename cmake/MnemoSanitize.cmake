# MNEMO_SANITIZE=address,undefined instruments everything built in this tree.
if(MNEMO_SANITIZE)
  set(_san "-fsanitize=${MNEMO_SANITIZE}" -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_compile_options(${_san})
  add_link_options(${_san})
endif()
