# Read by ctest after the e2e tests are discovered. The README test runs every example in turn,
# DeepSeek-V3 on 2,048 GPUs among them: about two minutes in the normal build, several times that
# under the sanitizers, beyond the five minutes other tests get. The published table's 48 rows of
# up to 64 GPUs take about 25 s in the normal build and over five minutes under the sanitizers.
set_tests_properties("e2e:every README example prints what the README shows" PROPERTIES TIMEOUT 1500)
set_tests_properties("e2e:the published table's mean error up to 64 GPUs stays under this version's figure"
                     PROPERTIES TIMEOUT 1200)
