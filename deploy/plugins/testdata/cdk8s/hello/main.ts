// cdk8s's getting-started app (a Deployment of hello-kubernetes behind a
// load-balanced Service), written with cdk8s-plus as its docs show, laid out
// as `cdk8s init typescript-app` lays a project out. REPLICAS and MESSAGE come
// from the environment: the plugin's env parameter sets them.
import { Construct } from 'constructs';
import { App, Chart, ChartProps } from 'cdk8s';
import * as kplus from 'cdk8s-plus-33';

export class HelloChart extends Chart {
  constructor(scope: Construct, id: string, props: ChartProps = {}) {
    super(scope, id, props);
    const deployment = new kplus.Deployment(this, 'deployment', {
      replicas: Number(process.env.REPLICAS ?? '1'),
      containers: [{
        name: 'hello-kubernetes',
        image: 'paulbouwer/hello-kubernetes:1.10',
        portNumber: 8080,
        envVariables: { MESSAGE: kplus.EnvValue.fromValue(process.env.MESSAGE ?? 'Hello from cdk8s') },
        securityContext: { user: 1000 },
      }],
    });
    deployment.exposeViaService({ name: 'hello', serviceType: kplus.ServiceType.LOAD_BALANCER, ports: [{ port: 80, targetPort: 8080 }] });
  }
}

const app = new App();
new HelloChart(app, 'hello');
app.synth();
