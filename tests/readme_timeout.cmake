# Read by ctest after the e2e tests are discovered. The README test runs every example in turn,
# DeepSeek-V3 on 2,048 GPUs among them: about two minutes in the normal build, several times that
# under the sanitizers, beyond the five minutes other tests get.
set_tests_properties("e2e:every README example prints what the README shows" PROPERTIES TIMEOUT 1500)
