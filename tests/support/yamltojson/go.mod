// kubectl's YAML to JSON (sigs.k8s.io/yaml), for tests that compare soperator's reader with it.
module soperator.test/yamltojson

go 1.22

require sigs.k8s.io/yaml v1.4.0
