{
  of(name):: { 'app.kubernetes.io/name': name },
}
