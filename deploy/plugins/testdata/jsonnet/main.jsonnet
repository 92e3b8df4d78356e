// A top-level function (tlas, tla-code), an external variable (ext-vars) and a
// library found through libs (../jsonnet-vendor).
local labels = import 'labels.libsonnet';

function(name='web', replicas=1)
  [
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: name + '-' + std.extVar('env'), labels: labels.of(name) },
      data: { replicas: std.toString(replicas), 'replicas-type': std.type(replicas), greeting: std.extVar('greeting') },
    },
    [{ apiVersion: 'v1', kind: 'Service', metadata: { name: name, labels: labels.of(name) } }],
  ]
