// A small library in the manner of Tanka's tutorial (its vendored k8s-libsonnet is
// not fetched here: the project's root holds what the environment imports).
{
  new(name, image, replicas=1):: {
    deployment: {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: name },
      spec: {
        replicas: replicas,
        selector: { matchLabels: { name: name } },
        template: {
          metadata: { labels: { name: name } },
          spec: { containers: [{ name: name, image: image, ports: [{ containerPort: 3000 }] }] },
        },
      },
    },
    service: {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: name },
      spec: { selector: { name: name }, ports: [{ port: 3000 }] },
    },
  },
}
