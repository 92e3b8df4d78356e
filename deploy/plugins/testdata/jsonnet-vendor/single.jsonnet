// One object rather than an array, chosen with the main parameter.
{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'single' } }
